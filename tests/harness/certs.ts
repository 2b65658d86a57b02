/**
 * A private certificate authority for TLS tests, made with the `openssl`
 * command (.ci/run installs it): the CA, a server certificate for 127.0.0.1
 * and a client certificate, all signed by it, as PEM files in a new folder.
 *
 * @module
 */
import { join } from "node:path";
import { tempDir } from "./procs.ts";

/** PEM files of a test CA and what it signed. */
export interface TestCertificates {
  dir: string;
  ca: string;
  /** For 127.0.0.1 only (an IP address, as the bus's URL names it). */
  serverCert: string;
  serverKey: string;
  /** Signed by the same CA for another name ("localhost"), not for 127.0.0.1. */
  otherCert: string;
  otherKey: string;
  clientCert: string;
  clientKey: string;
}

async function openssl(dir: string, ...args: string[]): Promise<void> {
  const out = await new Deno.Command("openssl", { args, cwd: dir, stdin: "null" }).output();
  if (!out.success) {
    throw new Error(`openssl ${args[0]} failed: ${new TextDecoder().decode(out.stderr)}`);
  }
}

/** Whether the `openssl` command is here. */
export function opensslAvailable(): boolean {
  try {
    return new Deno.Command("openssl", { args: ["version"], stdout: "null", stderr: "null" })
      .outputSync().success;
  } catch {
    return false;
  }
}

/** Makes a CA and, signed by it, a server certificate for 127.0.0.1, one for localhost, and a client one. */
export async function makeCertificates(): Promise<TestCertificates> {
  const dir = await tempDir("baton-certs-");
  const ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  await openssl(
    dir,
    "req",
    "-x509",
    ...ec,
    "-keyout",
    "ca.key",
    "-out",
    "ca.pem",
    "-days",
    "2",
    "-subj",
    "/CN=baton test CA",
  );
  await Deno.writeTextFile(join(dir, "server.ext"), "subjectAltName=IP:127.0.0.1\n");
  await Deno.writeTextFile(join(dir, "other.ext"), "subjectAltName=DNS:localhost\n");
  await Deno.writeTextFile(join(dir, "client.ext"), "extendedKeyUsage=clientAuth\n");
  for (
    const [name, cn] of [["server", "127.0.0.1"], ["other", "localhost"], [
      "client",
      "baton relay node",
    ]]
  ) {
    await openssl(
      dir,
      "req",
      ...ec,
      "-keyout",
      `${name}.key`,
      "-out",
      `${name}.csr`,
      "-subj",
      `/CN=${cn}`,
    );
    await openssl(
      dir,
      "x509",
      "-req",
      "-in",
      `${name}.csr`,
      "-CA",
      "ca.pem",
      "-CAkey",
      "ca.key",
      "-CAcreateserial",
      "-out",
      `${name}.pem`,
      "-days",
      "2",
      "-extfile",
      `${name}.ext`,
    );
  }
  return {
    dir,
    ca: join(dir, "ca.pem"),
    serverCert: join(dir, "server.pem"),
    serverKey: join(dir, "server.key"),
    otherCert: join(dir, "other.pem"),
    otherKey: join(dir, "other.key"),
    clientCert: join(dir, "client.pem"),
    clientKey: join(dir, "client.key"),
  };
}
