/**
 * `baton runner install|uninstall|status|logs|start|stop` (and the same for
 * `baton relay`): the role as a service of the platform, a systemd user unit
 * (or a system unit with `--system`), a launchd agent or a Windows scheduled
 * task (cli/_service_units.ts). `--dry-run` prints what would be written and
 * run, and changes nothing.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { UsageError } from "./_args.ts";
import {
  launchdLabel,
  launchdPlist,
  logFilePath,
  serviceName,
  type ServicePlatform,
  type ServiceSpec,
  systemdUnit,
  windowsTask,
} from "./_service_units.ts";

/** The service subcommands of `baton runner` and `baton relay`. */
export const SERVICE_ACTIONS: ReadonlySet<string> = new Set([
  "install",
  "uninstall",
  "status",
  "logs",
  "start",
  "stop",
]);

/** The help lines both roles show. */
export const SERVICE_HELP = (role: string) =>
  `As a service (systemd user unit, launchd agent or Windows scheduled task):
  baton ${role} install [--system] [--dry-run] [${role} options...]
                   Write the service (with these options), enable and start it;
                   it restarts on failure and starts at login (--system: at boot,
                   a systemd system unit run as the installing user, SUDO_USER under sudo; needs root)
  baton ${role} status | start | stop | uninstall [--system] [--dry-run]
  baton ${role} logs [-f] [--system]   journalctl, or the log file ~/.baton/logs/${role}.log
  Settings: ~/.baton/config.json, and for systemd ~/.baton/${role}.env (KEY=value lines).
`;

/** What a service action needs of the machine; tests and other OSes inject it. */
export interface ServiceHost {
  platform: ServicePlatform;
  home: string;
  env: (k: string) => string | undefined;
  /** The user id (launchd's `gui/<uid>` domain). */
  uid: number | null;
  /** Whether a program is on PATH. */
  has: (program: string) => boolean;
  /** Runs a command with inherited output; its exit code. */
  run: (cmd: string[]) => Promise<number>;
  print: (line: string) => void;
  /** Another account's home folder (systemd system units installed with sudo). */
  homeOf?: (user: string) => string | null;
}

/** A plan: the file to write (or remove) and the commands to run, in order. */
export interface ServicePlan {
  file?: { path: string; content: string; remove?: boolean };
  commands: string[][];
  /** Commands whose failure does not stop the plan (an unload of what is not loaded). */
  optional?: Set<number>;
  notes: string[];
}

/** The command line a service runs: this program, as it was started, with `role`. */
export function serviceCommand(role: string, extra: string[]): string[] {
  const exec = Deno.execPath();
  if (!/^deno(\.exe)?$/i.test(basename(exec))) return [exec, role, ...extra];
  const main = Deno.mainModule.startsWith("file:")
    ? fileURLToPath(Deno.mainModule)
    : Deno.mainModule;
  const args = ["run", "-A", "--quiet"];
  const config = main.startsWith("/") || /^[A-Za-z]:/.test(main)
    ? join(dirname(main), "deno.json")
    : "";
  if (config && existsSync(config)) args.push("--config", config);
  return [exec, ...args, main, role, ...extra];
}

/** The plan of `action` for `spec` on `host`. */
export function servicePlan(action: string, spec: ServiceSpec, host: ServiceHost): ServicePlan {
  const name = serviceName(spec.role);
  if (host.platform === "linux") {
    const ctl = spec.system ? ["systemctl"] : ["systemctl", "--user"];
    const path = spec.system ? `/etc/systemd/system/${name}.service` : join(
      host.env("XDG_CONFIG_HOME") ?? join(host.home, ".config"),
      "systemd",
      "user",
      `${name}.service`,
    );
    switch (action) {
      case "install":
        return {
          file: { path, content: systemdUnit(spec) },
          commands: [[...ctl, "daemon-reload"], [...ctl, "enable", "--now", name]],
          notes: spec.system ? [] : [
            `To keep it running when you are logged out: loginctl enable-linger ${
              host.env("USER") ?? "$USER"
            }`,
          ],
        };
      case "uninstall":
        return {
          commands: [[...ctl, "disable", "--now", name], [...ctl, "daemon-reload"]],
          file: { path, content: "", remove: true },
          optional: new Set([0]),
          notes: [],
        };
      case "logs":
        return {
          commands: [[
            "journalctl",
            ...(spec.system ? [] : ["--user"]),
            "-u",
            name,
            "-n",
            "200",
            "--no-pager",
          ]],
          notes: [],
        };
      case "status":
        return { commands: [[...ctl, "status", name, "--no-pager"]], notes: [] };
      default:
        return { commands: [[...ctl, action, name]], notes: [] };
    }
  }
  if (host.platform === "darwin") {
    const label = launchdLabel(spec.role);
    const domain = `gui/${host.uid ?? 501}`;
    const path = join(host.home, "Library", "LaunchAgents", `${label}.plist`);
    switch (action) {
      case "install":
        return {
          file: { path, content: launchdPlist(spec) },
          commands: [["launchctl", "bootout", `${domain}/${label}`], [
            "launchctl",
            "bootstrap",
            domain,
            path,
          ]],
          optional: new Set([0]),
          notes: [`Logs: ${logFilePath(spec)} (baton ${spec.role} logs)`],
        };
      case "uninstall":
        return {
          commands: [["launchctl", "bootout", `${domain}/${label}`]],
          file: { path, content: "", remove: true },
          optional: new Set([0]),
          notes: [],
        };
      case "logs":
        return { commands: [["tail", "-n", "200", logFilePath(spec)]], notes: [] };
      case "status":
        return { commands: [["launchctl", "print", `${domain}/${label}`]], notes: [] };
      case "start":
        return { commands: [["launchctl", "kickstart", `${domain}/${label}`]], notes: [] };
      default:
        return { commands: [["launchctl", "kill", "SIGTERM", `${domain}/${label}`]], notes: [] };
    }
  }
  const path = join(host.home, ".baton", "service", `${name}.xml`);
  switch (action) {
    case "install":
      return {
        file: { path, content: windowsTask(spec) },
        commands: [["schtasks", "/Create", "/TN", name, "/XML", path, "/F"], [
          "schtasks",
          "/Run",
          "/TN",
          name,
        ]],
        notes: [`Logs: ${logFilePath(spec, "\\")} (baton ${spec.role} logs)`],
      };
    case "uninstall":
      return {
        commands: [["schtasks", "/End", "/TN", name], ["schtasks", "/Delete", "/TN", name, "/F"]],
        file: { path, content: "", remove: true },
        optional: new Set([0]),
        notes: [],
      };
    case "logs":
      return {
        commands: [[
          "powershell",
          "-NoProfile",
          "-Command",
          `Get-Content -Tail 200 '${logFilePath(spec, "\\").replaceAll("'", "''")}'`,
        ]],
        notes: [],
      };
    case "status":
      return { commands: [["schtasks", "/Query", "/TN", name, "/V", "/FO", "LIST"]], notes: [] };
    case "start":
      return { commands: [["schtasks", "/Run", "/TN", name]], notes: [] };
    default:
      return { commands: [["schtasks", "/End", "/TN", name]], notes: [] };
  }
}

/** Options of {@linkcode serviceMain}. */
export interface ServiceMainOptions {
  /** The machine (default this one). */
  host?: ServiceHost;
  /** Checks the role's options given to `install` (throws UsageError), so no unit is written that cannot start. */
  validate?: (roleArgs: string[]) => void;
}

/** `baton <role> <action> …`: parses its flags, then prints or carries out the plan. */
export async function serviceMain(
  role: "runner" | "relay",
  argv: string[],
  options: ServiceMainOptions = {},
): Promise<number> {
  const host = options.host ?? defaultHost();
  const [action, ...rest] = argv;
  if (!action || !SERVICE_ACTIONS.has(action)) {
    throw new UsageError(`Unknown service action: '${action}'`);
  }
  let system = false;
  let dryRun = false;
  let follow = false;
  const extra: string[] = [];
  for (const a of rest) {
    if (a === "--system") system = true;
    else if (a === "--dry-run") dryRun = true;
    else if ((a === "-f" || a === "--follow") && action === "logs") follow = true;
    else if (action === "install") extra.push(a);
    else throw new UsageError(`Unknown option for ${action}: '${a}'`);
  }
  options.validate?.(extra);
  if (system && host.platform !== "linux") {
    throw new UsageError(
      "--system is for systemd (Linux); launchd agents and scheduled tasks are per user",
    );
  }
  // A system unit runs as whoever installed it; under sudo that is SUDO_USER,
  // whose home (not root's, which sudo set) holds the ~/.baton it reads.
  const user = system ? host.env("SUDO_USER") || host.env("USER") || "root" : null;
  const home = user && user !== host.env("USER") ? host.homeOf?.(user) ?? host.home : host.home;
  const spec: ServiceSpec = {
    role,
    command: serviceCommand(role, extra),
    home,
    system,
    ...(user ? { user } : {}),
    ...(host.env("PATH") ? { path: host.env("PATH")! } : {}),
  };
  const plan = servicePlan(action, spec, host);
  if (follow) {
    const cmd = plan.commands[0]!;
    if (cmd[0] === "powershell") cmd[cmd.length - 1] += " -Wait";
    else cmd.push("-f");
  }
  if (dryRun) {
    if (plan.file && !plan.file.remove) {
      host.print(`# ${plan.file.path}`);
      host.print(plan.file.content.replaceAll("\r\n", "\n").trimEnd());
    }
    if (plan.file?.remove) host.print(`# would remove ${plan.file.path}`);
    for (const c of plan.commands) host.print(`$ ${c.join(" ")}`);
    return 0;
  }
  const tool = plan.commands[0]![0]!;
  if (!host.has(tool)) {
    throw new UsageError(
      `'${tool}' is not available here, so the ${role} cannot be managed as a service ` +
        `(see 'baton ${role} install --dry-run' for what it would write)`,
    );
  }
  if (plan.file && !plan.file.remove) {
    await Deno.mkdir(dirname(plan.file.path), { recursive: true });
    await Deno.mkdir(join(host.home, ".baton", "logs"), { recursive: true });
    await Deno.writeFile(plan.file.path, encodeFor(plan.file.path, plan.file.content));
    host.print(`Wrote ${plan.file.path}`);
  }
  for (const [i, c] of plan.commands.entries()) {
    const code = await host.run(c);
    if (code !== 0 && !plan.optional?.has(i)) {
      host.print(`'${c.join(" ")}' failed (exit ${code})`);
      return 1;
    }
  }
  if (plan.file?.remove) {
    await Deno.remove(plan.file.path).catch((err) => {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    });
    host.print(`Removed ${plan.file.path}`);
  }
  for (const n of plan.notes) host.print(n);
  return 0;
}

/** schtasks reads a task's XML as UTF-16 (with its byte order mark). */
function encodeFor(path: string, content: string): Uint8Array {
  if (!path.endsWith(".xml")) return new TextEncoder().encode(content);
  const out = new Uint8Array(2 + content.length * 2);
  out[0] = 0xff;
  out[1] = 0xfe;
  for (let i = 0; i < content.length; i++) {
    const c = content.charCodeAt(i);
    out[2 + i * 2] = c & 0xff;
    out[3 + i * 2] = c >> 8;
  }
  return out;
}

function onPath(program: string): boolean {
  const exts = Deno.build.os === "windows" ? ["", ".exe", ".cmd"] : [""];
  const sep = Deno.build.os === "windows" ? ";" : ":";
  for (const dir of (Deno.env.get("PATH") ?? "").split(sep)) {
    if (!dir) continue;
    for (const e of exts) if (existsSync(join(dir, program + e))) return true;
  }
  return false;
}

function defaultHost(): ServiceHost {
  const os = Deno.build.os;
  const home = Deno.env.get("HOME") ?? Deno.env.get("USERPROFILE");
  if (!home) throw new UsageError("HOME is not set");
  return {
    platform: os === "darwin" ? "darwin" : os === "windows" ? "windows" : "linux",
    home,
    env: (k) => Deno.env.get(k),
    uid: Deno.uid(),
    has: onPath,
    run: async (cmd) =>
      (await new Deno.Command(cmd[0]!, { args: cmd.slice(1) }).spawn().status).code,
    print: (line) => console.log(line),
    homeOf: (user) => {
      try {
        const entry = Deno.readTextFileSync("/etc/passwd").split("\n")
          .find((l) => l.startsWith(`${user}:`));
        return entry?.split(":")[5] || null;
      } catch {
        return null;
      }
    },
  };
}
