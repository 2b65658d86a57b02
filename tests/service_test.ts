/**
 * `baton runner install` / `baton relay install` and the other service
 * actions: the files written for systemd (checked by `systemd-analyze
 * verify` where it is installed), launchd and the Windows task scheduler,
 * the commands run, `--dry-run`, and a machine without the platform's tool.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { launchdPlist, systemdUnit, windowsArg, windowsTask } from "../cli/_service_units.ts";
import { type ServiceHost, serviceMain } from "../cli/service.ts";
import { baseEnv, baton, tempDir } from "./harness/procs.ts";

function host(platform: ServiceHost["platform"], home: string, has = true) {
  const ran: string[][] = [];
  const printed: string[] = [];
  const h: ServiceHost = {
    platform,
    home,
    env: (k) => ({ PATH: "/usr/bin:/bin", USER: "ada" } as Record<string, string>)[k],
    uid: 501,
    has: () => has,
    run: (cmd) => {
      ran.push(cmd);
      return Promise.resolve(0);
    },
    print: (l) => printed.push(l),
  };
  return { h, ran, printed };
}

const exists = (p: string) => Deno.stat(p).then(() => true, () => false);

Deno.test("a systemd user unit restarts the runner on failure, reads its env file and passes quoted arguments", async () => {
  const unit = systemdUnit({
    role: "runner",
    command: ["/opt/baton/baton-runner", "runner", "--name", "my box", "--x=100%"],
    home: "/home/ada",
    path: "/usr/bin:/bin",
  });
  assert.match(unit, /^ExecStart=\/opt\/baton\/baton-runner runner --name "my box" --x=100%%$/m);
  assert.match(unit, /^Restart=on-failure$/m);
  assert.match(unit, /^RestartPreventExitStatus=1 2$/m);
  assert.match(unit, /^EnvironmentFile=-\/home\/ada\/\.baton\/runner\.env$/m);
  assert.match(unit, /^Environment=HOME=\/home\/ada$/m);
  assert.match(unit, /^WantedBy=default\.target$/m);
  assert.doesNotMatch(unit, /^User=/m);
  const system = systemdUnit({
    role: "relay",
    command: ["/usr/local/bin/baton-relay", "relay"],
    home: "/home/ada",
    system: true,
    user: "ada",
  });
  assert.match(system, /^User=ada$/m);
  assert.match(system, /^WantedBy=multi-user\.target$/m);

  const analyze = await new Deno.Command("systemd-analyze", { args: ["--version"] }).output()
    .catch(() => null);
  if (!analyze?.success) return; // Not installed here: the checks above stand.
  const dir = await tempDir("baton-unit-");
  const real = Deno.execPath();
  for (
    const [name, text] of [
      [
        "baton-runner.service",
        systemdUnit({ role: "runner", command: [real, "runner"], home: dir }),
      ],
      [
        "baton-relay.service",
        systemdUnit({
          role: "relay",
          command: [real, "relay", "--port", "7420"],
          home: dir,
          system: true,
          user: "root",
        }),
      ],
    ] as const
  ) {
    await Deno.writeTextFile(join(dir, name), text);
    const out = await new Deno.Command("systemd-analyze", {
      args: ["verify", "--man=no", join(dir, name)],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const said = new TextDecoder().decode(out.stderr);
    // Outside a booted systemd it may grumble about the manager; never about our unit.
    const ours = said.split("\n").filter((l) => l.includes(name));
    assert.deepEqual(ours, [], `${name}:\n${said}`);
    assert.equal(out.code, 0, `${name}:\n${said}`);
  }
});

Deno.test("a launchd agent keeps the runner alive after a failure and logs to ~/.baton/logs", () => {
  const plist = launchdPlist({
    role: "runner",
    command: ["/Users/ada/bin/baton-runner", "runner", "--name", "a<b"],
    home: "/Users/ada",
  });
  assert.match(plist, /<key>Label<\/key>\n\s*<string>dev\.baton\.runner<\/string>/);
  assert.match(plist, /<string>a&lt;b<\/string>/);
  assert.match(
    plist,
    /<key>KeepAlive<\/key>\n\s*<dict>\n\s*<key>SuccessfulExit<\/key>\n\s*<false\/>/,
  );
  assert.match(
    plist,
    /<key>StandardErrorPath<\/key>\n\s*<string>\/Users\/ada\/\.baton\/logs\/runner\.log<\/string>/,
  );
  assert.match(plist, /<key>RunAtLoad<\/key>\n\s*<true\/>/);
});

Deno.test("a Windows task starts the runner at logon, restarts it on failure and appends its output to a log", () => {
  const xml = windowsTask({
    role: "runner",
    command: ["C:\\Program Files\\baton\\baton-runner.exe", "runner"],
    home: "C:\\Users\\ada",
  });
  assert.match(xml, /<LogonTrigger>/);
  assert.match(
    xml,
    /<RestartOnFailure><Interval>PT1M<\/Interval><Count>999<\/Count><\/RestartOnFailure>/,
  );
  assert.match(xml, /<ExecutionTimeLimit>PT0S<\/ExecutionTimeLimit>/);
  assert.match(
    xml,
    /<Arguments>\/d \/s \/c &quot;&quot;C:\\Program Files\\baton\\baton-runner\.exe&quot; runner &gt;&gt; C:\\Users\\ada\\\.baton\\logs\\runner\.log 2&gt;&amp;1&quot;<\/Arguments>/,
  );
  assert.equal(windowsArg('say "hi"'), '"say \\"hi\\""');
  assert.equal(windowsArg("C:\\dir with space\\"), '"C:\\dir with space\\\\"');
});

Deno.test("install writes the unit and enables it; uninstall disables it and removes the file", async (t) => {
  await t.step("linux, user unit", async () => {
    const home = await tempDir("baton-svc-");
    const { h, ran, printed } = host("linux", home);
    assert.equal(await serviceMain("runner", ["install", "--name", "box"], { host: h }), 0);
    const unit = join(home, ".config", "systemd", "user", "baton-runner.service");
    assert.match(await Deno.readTextFile(unit), /runner --name box$/m);
    assert.deepEqual(ran, [
      ["systemctl", "--user", "daemon-reload"],
      ["systemctl", "--user", "enable", "--now", "baton-runner"],
    ]);
    assert.ok(printed.some((l) => l.includes("loginctl enable-linger ada")));
    ran.length = 0;
    assert.equal(await serviceMain("runner", ["logs", "-f"], { host: h }), 0);
    assert.equal(await serviceMain("runner", ["stop"], { host: h }), 0);
    assert.equal(await serviceMain("runner", ["uninstall"], { host: h }), 0);
    assert.deepEqual(ran, [
      ["journalctl", "--user", "-u", "baton-runner", "-n", "200", "--no-pager", "-f"],
      ["systemctl", "--user", "stop", "baton-runner"],
      ["systemctl", "--user", "disable", "--now", "baton-runner"],
      ["systemctl", "--user", "daemon-reload"],
    ]);
    assert.equal(await exists(unit), false);
  });
  await t.step("macOS, launchd agent", async () => {
    const home = await tempDir("baton-svc-");
    const { h, ran } = host("darwin", home);
    assert.equal(await serviceMain("relay", ["install", "--port", "8080"], { host: h }), 0);
    const plist = join(home, "Library", "LaunchAgents", "dev.baton.relay.plist");
    assert.match(await Deno.readTextFile(plist), /<string>8080<\/string>/);
    assert.deepEqual(ran.at(-1), ["launchctl", "bootstrap", "gui/501", plist]);
    assert.ok(await exists(join(home, ".baton", "logs")), "the log folder exists for launchd");
  });
  await t.step("Windows, scheduled task (XML in UTF-16)", async () => {
    const home = await tempDir("baton-svc-");
    const { h, ran } = host("windows", home);
    assert.equal(await serviceMain("runner", ["install"], { host: h }), 0);
    const xml = await Deno.readFile(join(home, ".baton", "service", "baton-runner.xml"));
    assert.deepEqual([...xml.slice(0, 2)], [0xff, 0xfe]);
    assert.match(new TextDecoder("utf-16le").decode(xml.slice(2)), /<LogonTrigger>/);
    assert.equal(ran[0]![0], "schtasks");
    await assert.rejects(
      serviceMain("runner", ["install", "--system"], { host: h }),
      /--system is for systemd/,
    );
  });
});

Deno.test("a system unit installed with sudo runs as the user who asked, with their home", async () => {
  const { h, printed } = host("linux", "/root");
  h.env = (k) =>
    ({ USER: "root", SUDO_USER: "ada", PATH: "/usr/bin" } as Record<string, string>)[k];
  h.homeOf = (u) => u === "ada" ? "/home/ada" : null;
  assert.equal(await serviceMain("runner", ["install", "--system", "--dry-run"], { host: h }), 0);
  const unit = printed.join("\n");
  assert.match(unit, /^# \/etc\/systemd\/system\/baton-runner\.service$/m);
  assert.match(unit, /^User=ada$/m);
  assert.match(unit, /^Environment=HOME=\/home\/ada$/m);
  assert.match(unit, /^EnvironmentFile=-\/home\/ada\/\.baton\/runner\.env$/m);
  assert.match(unit, /^\$ systemctl enable --now baton-runner$/m);
});

Deno.test("without the platform's service tool, install says so in one line and writes nothing", async () => {
  const home = await tempDir("baton-svc-");
  const { h, ran } = host("linux", home, false);
  await assert.rejects(
    serviceMain("runner", ["install"], { host: h }),
    /'systemctl' is not available here/,
  );
  assert.deepEqual(ran, []);
  assert.equal(await exists(join(home, ".config")), false);
});

Deno.test("baton runner install --dry-run prints the unit and the commands, and changes nothing", async () => {
  const home = await tempDir("baton-svc-home-");
  const r = await baton(["runner", "install", "--dry-run", "--name", "desk"], baseEnv(home));
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, new RegExp(`^# ${home}/.config/systemd/user/baton-runner.service$`, "m"));
  assert.match(r.stdout, /^ExecStart=.* runner --name desk$/m);
  assert.match(r.stdout, /^\$ systemctl --user enable --now baton-runner$/m);
  assert.deepEqual([...Deno.readDirSync(home)], []);

  const typo = await baton(["runner", "install", "--dry-run", "--nme", "desk"], baseEnv(home));
  assert.equal(typo.code, 2);
  assert.match(typo.stderr.trim(), /^baton runner: .*nme/);
  assert.equal(typo.stdout, "", "no unit printed for options the runner would refuse");
  const port = await baton(["relay", "install", "--dry-run", "--port", "99999"], baseEnv(home));
  assert.equal(port.code, 2);
  assert.equal(port.stderr.trim(), "baton relay: Invalid --port: '99999' (expected 0-65535)");

  const bad = await baton(["relay", "status", "--bogus"], baseEnv(home));
  assert.equal(bad.code, 2);
  assert.equal(bad.stderr.trim(), "baton relay: Unknown option for status: '--bogus'");
});
