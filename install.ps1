# Installs a baton executable on Windows from a release: downloads the file
# and SHA256SUMS, refuses a file whose sum does not match, and puts it in
# %LOCALAPPDATA%\baton\bin, which it adds to the user's PATH.
#
#   irm https://github.com/OWNER/REPO/releases/latest/download/install.ps1 | iex
#   .\install.ps1 [-Role runner|relay|all] [-Version vX.Y.Z] [-Dir DIR]
#
# Environment: BATON_DOWNLOAD_URL, BATON_REPO, BATON_VERSION,
# BATON_INSTALL_DIR (as install.sh). See docs/install.md.
param(
  [ValidateSet("runner", "relay", "all")][string]$Role = "runner",
  [string]$Version = $(if ($env:BATON_VERSION) { $env:BATON_VERSION } else { "latest" }),
  [string]$Dir = $(if ($env:BATON_INSTALL_DIR) { $env:BATON_INSTALL_DIR } else { Join-Path $env:LOCALAPPDATA "baton\bin" })
)
$ErrorActionPreference = "Stop"
$ProgressPreference = "SilentlyContinue"

function Fail([string]$Message) {
  Write-Error "install.ps1: $Message" -ErrorAction Continue
  exit 1
}

$Repo = if ($env:BATON_REPO) { $env:BATON_REPO } else { "__BATON_REPO__" }
$Name = @{ runner = "baton-runner"; relay = "baton-relay"; all = "baton" }[$Role]
$Arch = $env:PROCESSOR_ARCHITECTURE
if ($Arch -ne "AMD64") {
  Fail "no Windows release for the CPU $Arch (only x86_64): run from source (README)"
}
$File = "$Name-x86_64-pc-windows-msvc.exe"

if ($env:BATON_DOWNLOAD_URL) {
  $Base = $env:BATON_DOWNLOAD_URL.TrimEnd("/")
} elseif ($Repo -eq "__BATON_REPO__") {
  Fail "set BATON_REPO=owner/repo or BATON_DOWNLOAD_URL (this copy of the script names no release)"
} elseif ($Version -eq "latest") {
  $Base = "https://github.com/$Repo/releases/latest/download"
} else {
  $Base = "https://github.com/$Repo/releases/download/$Version"
}

$Tmp = Join-Path ([System.IO.Path]::GetTempPath()) ("baton-" + [guid]::NewGuid())
New-Item -ItemType Directory -Path $Tmp | Out-Null
try {
  Write-Host "Downloading $File from $Base"
  try {
    Invoke-WebRequest -UseBasicParsing -Uri "$Base/SHA256SUMS" -OutFile (Join-Path $Tmp "SHA256SUMS")
    Invoke-WebRequest -UseBasicParsing -Uri "$Base/$File" -OutFile (Join-Path $Tmp $File)
  } catch {
    Fail "could not download from ${Base}: $($_.Exception.Message)"
  }
  $Expected = $null
  foreach ($Line in Get-Content (Join-Path $Tmp "SHA256SUMS")) {
    $Parts = $Line -split "\s+", 2
    if ($Parts.Count -eq 2 -and $Parts[1].TrimStart("*") -eq $File) { $Expected = $Parts[0].ToLower(); break }
  }
  if (-not $Expected) { Fail "$File is not listed in SHA256SUMS: nothing installed" }
  $Actual = (Get-FileHash -Algorithm SHA256 (Join-Path $Tmp $File)).Hash.ToLower()
  if ($Expected -ne $Actual) {
    Fail "checksum mismatch for $File (expected $Expected, got $Actual): nothing installed"
  }
  New-Item -ItemType Directory -Force -Path $Dir | Out-Null
  $Target = Join-Path $Dir "$Name.exe"
  Move-Item -Force (Join-Path $Tmp $File) $Target
  Write-Host "Installed $Target (sha256 $Actual)"

  $UserPath = [Environment]::GetEnvironmentVariable("Path", "User")
  if (-not (($UserPath -split ";") -contains $Dir)) {
    [Environment]::SetEnvironmentVariable("Path", ($(if ($UserPath) { "$UserPath;" } else { "" }) + $Dir), "User")
    $env:Path = "$env:Path;$Dir"
    Write-Host "Added $Dir to your PATH (new terminals see it)"
  }
  switch ($Role) {
    "runner" { Write-Host "Next: $Name setup, then $Name install (a scheduled task that starts at logon)" }
    "relay" { Write-Host "Next: $Name --help, or $Name install" }
    "all" { Write-Host "Next: $Name up" }
  }
} finally {
  Remove-Item -Recurse -Force $Tmp -ErrorAction SilentlyContinue
}
