/**
 * What `baton runner install` / `baton relay install` write, per platform, as
 * pure functions of a {@linkcode ServiceSpec}: a systemd unit (user or
 * system), a launchd agent, a Windows scheduled task. Each restarts the
 * program when it fails, starts it at login (or boot, for a system unit) and
 * logs where the platform's tools show it.
 *
 * @module
 */

/** The platforms a service is made for. */
export type ServicePlatform = "linux" | "darwin" | "windows";

/** One service to describe. */
export interface ServiceSpec {
  role: "runner" | "relay";
  /** The program and its arguments (`baton-runner runner`, or `deno run … main.ts runner`). */
  command: string[];
  /** The user's home (the service's HOME, where ~/.baton is). */
  home: string;
  /** systemd: a system unit (`--system`) run as `user` instead of a user unit. */
  system?: boolean;
  /** The account a system unit runs as. */
  user?: string;
  /** PATH the service gets (launchd and system units start with a bare one). */
  path?: string;
}

/** The service's name: `baton-runner` / `baton-relay` (launchd: `dev.baton.runner`). */
export function serviceName(role: string): string {
  return `baton-${role}`;
}

/** The launchd label. */
export function launchdLabel(role: string): string {
  return `dev.baton.${role}`;
}

/** The environment file a systemd unit reads (optional; `KEY=value` lines). */
export function envFilePath(spec: Pick<ServiceSpec, "home" | "role">, sep = "/"): string {
  return [spec.home, ".baton", `${spec.role}.env`].join(sep);
}

/** The log file launchd and the Windows task write to. */
export function logFilePath(spec: Pick<ServiceSpec, "home" | "role">, sep = "/"): string {
  return [spec.home, ".baton", "logs", `${spec.role}.log`].join(sep);
}

const DESCRIPTION = {
  runner: "baton runner: runs AI coding agents for a baton relay",
  relay: "baton relay: the server between baton runners and their users",
};

/** One systemd command-line word, quoted when it must be, `%` and `$` escaped. */
function systemdWord(word: string): string {
  const escaped = word.replaceAll("%", "%%").replaceAll("$", "$$$$");
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(escaped)) return escaped;
  return `"${escaped.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

/** A systemd unit: `~/.config/systemd/user/baton-<role>.service` or `/etc/systemd/system/…`. */
export function systemdUnit(spec: ServiceSpec): string {
  const lines = [
    "[Unit]",
    `Description=${DESCRIPTION[spec.role]}`,
    "Wants=network-online.target",
    "After=network-online.target",
    "",
    "[Service]",
    "Type=simple",
    `ExecStart=${spec.command.map(systemdWord).join(" ")}`,
    `WorkingDirectory=${systemdWord(spec.home)}`,
    `Environment=${systemdWord(`HOME=${spec.home}`)}`,
    ...(spec.path ? [`Environment=${systemdWord(`PATH=${spec.path}`)}`] : []),
    // Settings beyond ~/.baton/config.json; "-": the file may be absent.
    `EnvironmentFile=-${systemdWord(envFilePath(spec))}`,
    ...(spec.system && spec.user ? [`User=${spec.user}`] : []),
    "Restart=on-failure",
    // Not after a refused key (1) or a usage error (2): restarting cannot fix either.
    "RestartPreventExitStatus=1 2",
    "RestartSec=5",
    // SIGTERM to the supervisor (it stops its daemon and workers), then the rest.
    "KillMode=mixed",
    "TimeoutStopSec=30",
    "",
    "[Install]",
    `WantedBy=${spec.system ? "multi-user.target" : "default.target"}`,
    "",
  ];
  return lines.join("\n");
}

function xml(text: string): string {
  return text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;")
    .replaceAll('"', "&quot;");
}

/** A launchd agent: `~/Library/LaunchAgents/dev.baton.<role>.plist`. */
export function launchdPlist(spec: ServiceSpec): string {
  const log = logFilePath(spec);
  const env: Record<string, string> = {
    HOME: spec.home,
    ...(spec.path ? { PATH: spec.path } : {}),
  };
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    '<plist version="1.0">',
    "<dict>",
    "  <key>Label</key>",
    `  <string>${launchdLabel(spec.role)}</string>`,
    "  <key>ProgramArguments</key>",
    "  <array>",
    ...spec.command.map((a) => `    <string>${xml(a)}</string>`),
    "  </array>",
    "  <key>WorkingDirectory</key>",
    `  <string>${xml(spec.home)}</string>`,
    "  <key>EnvironmentVariables</key>",
    "  <dict>",
    ...Object.entries(env).flatMap(([k, v]) => [
      `    <key>${xml(k)}</key>`,
      `    <string>${xml(v)}</string>`,
    ]),
    "  </dict>",
    "  <key>RunAtLoad</key>",
    "  <true/>",
    // Restarted when it fails, not after a clean stop.
    "  <key>KeepAlive</key>",
    "  <dict>",
    "    <key>SuccessfulExit</key>",
    "    <false/>",
    "  </dict>",
    "  <key>ThrottleInterval</key>",
    "  <integer>5</integer>",
    "  <key>StandardOutPath</key>",
    `  <string>${xml(log)}</string>`,
    "  <key>StandardErrorPath</key>",
    `  <string>${xml(log)}</string>`,
    "</dict>",
    "</plist>",
    "",
  ].join("\n");
}

/** A Windows argument, quoted as CommandLineToArgvW reads it. */
export function windowsArg(arg: string): string {
  if (arg !== "" && !/[\s"]/.test(arg)) return arg;
  return `"${arg.replace(/(\\*)"/g, '$1$1\\"').replace(/(\\+)$/, "$1$1")}"`;
}

/**
 * A scheduled task (schtasks /Create /XML): at logon, restarted every minute
 * when it fails, no time limit; output appended to a log file through cmd.exe.
 */
export function windowsTask(spec: ServiceSpec): string {
  const log = logFilePath(spec, "\\");
  const line = spec.command.map(windowsArg).join(" ");
  const args = `/d /s /c "${line} >> ${windowsArg(log)} 2>&1"`;
  return [
    '<?xml version="1.0" encoding="UTF-16"?>',
    '<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">',
    "  <RegistrationInfo>",
    `    <Description>${xml(DESCRIPTION[spec.role])}</Description>`,
    "  </RegistrationInfo>",
    "  <Triggers>",
    "    <LogonTrigger><Enabled>true</Enabled></LogonTrigger>",
    "  </Triggers>",
    "  <Settings>",
    "    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>",
    "    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>",
    "    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>",
    "    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>",
    "    <RestartOnFailure><Interval>PT1M</Interval><Count>999</Count></RestartOnFailure>",
    "    <StartWhenAvailable>true</StartWhenAvailable>",
    "  </Settings>",
    '  <Actions Context="Author">',
    "    <Exec>",
    "      <Command>cmd.exe</Command>",
    `      <Arguments>${xml(args)}</Arguments>`,
    `      <WorkingDirectory>${xml(spec.home)}</WorkingDirectory>`,
    "    </Exec>",
    "  </Actions>",
    "</Task>",
    "",
  ].join("\r\n");
}
