/**
 * The first screen: sign in, create an account, or create the owner account
 * of a new relay.
 *
 * @module
 */
import { useEffect, useState } from "preact/hooks";
import type { SetupStatusResponse } from "../../../shared/api.ts";
import { api } from "../api.ts";
import { navigate, route } from "../route.ts";
import { loadMe } from "../store.ts";

type Mode = "signin" | "signup" | "owner";

/** The first screen: sign in, or create the owner account on a new relay. */
export function SignIn() {
  const [mode, setMode, allowSignup] = useSetupMode();
  const [name, setName] = useState("");
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  async function submit(ev: Event) {
    ev.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (mode !== "signin") {
        // The relay answers a sign-up alike whether or not the email has an
        // account (so it cannot be used to find out); signing in tells.
        await api("/api/auth/sign-up/email", {
          method: "POST",
          body: { name: name || email.split("@")[0], email, password },
        });
      }
      try {
        await api("/api/auth/sign-in/email", { method: "POST", body: { email, password } });
      } catch (err) {
        if (mode === "signin") throw err;
        throw new Error(
          "Could not sign in with this email and password. If the email already has an " +
            "account, sign in with its password.",
        );
      }
      await loadMe();
      // Signed in from an address the app has no page for (a bookmarked /login):
      // go home rather than to "Page not found".
      if (route.value.page === "missing") navigate("/", true);
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  }

  if (mode === null) return <div class="center-screen" aria-busy="true" />;
  const creating = mode !== "signin";
  return (
    <main class="center-screen">
      <form class="card auth-card" onSubmit={submit} aria-labelledby="auth-title">
        <div class="brand-lg" aria-hidden="true">
          <span class="logo-mark" /> baton
        </div>
        <h1 id="auth-title">
          {mode === "owner"
            ? "Create the owner account"
            : mode === "signup"
            ? "Create an account"
            : "Sign in"}
        </h1>
        {mode === "owner" && (
          <p class="muted">
            This relay has no account yet. The first account owns it: your runners and sessions will
            be yours alone.
          </p>
        )}
        {creating && (
          <label>
            Name
            <input
              name="name"
              autocomplete="name"
              value={name}
              onInput={(e) => setName(e.currentTarget.value)}
            />
          </label>
        )}
        <label>
          Email
          <input
            name="email"
            type="email"
            required
            autocomplete="username"
            value={email}
            onInput={(e) => setEmail(e.currentTarget.value)}
          />
        </label>
        <label>
          Password
          <input
            name="password"
            type="password"
            required
            minLength={creating ? 8 : undefined}
            autocomplete={creating ? "new-password" : "current-password"}
            value={password}
            onInput={(e) => setPassword(e.currentTarget.value)}
          />
        </label>
        {error && <p class="error" role="alert">{error}</p>}
        <button class="btn primary wide" type="submit" disabled={busy}>
          {busy ? "Please wait…" : creating ? "Create account" : "Sign in"}
        </button>
        <SwitchMode mode={mode} allowSignup={allowSignup} onMode={setMode} />
      </form>
    </main>
  );
}

/**
 * What the relay asks for first: null while it has not said, "owner" on a
 * relay with no account yet, else "signin"; and whether anyone may sign up.
 */
function useSetupMode(): [mode: Mode | null, setMode: (mode: Mode) => void, allowSignup: boolean] {
  const [mode, setMode] = useState<Mode | null>(null);
  const [allowSignup, setAllowSignup] = useState(false);
  useEffect(() => {
    api<SetupStatusResponse>("/api/setup-status").then(
      (s) => {
        setAllowSignup(s.allowSignup);
        setMode(s.needsOwner ? "owner" : "signin");
      },
      () => setMode("signin"),
    );
  }, []);
  return [mode, setMode, allowSignup];
}

/**
 * The link between signing in and signing up (when the relay lets anyone
 * sign up); each is its own button, so the one clicked goes away.
 */
function SwitchMode(
  { mode, allowSignup, onMode }: { mode: Mode; allowSignup: boolean; onMode: (m: Mode) => void },
) {
  return (
    <>
      {mode === "signin" && allowSignup && (
        <button
          type="button"
          class="btn link"
          onClick={() => onMode("signup")}
        >
          No account? Create one
        </button>
      )}
      {mode === "signup" && (
        <button type="button" class="btn link" onClick={() => onMode("signin")}>
          Have an account? Sign in
        </button>
      )}
    </>
  );
}
