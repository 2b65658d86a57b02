/**
 * The password form of the Account card.
 *
 * @module
 */
import { useState } from "preact/hooks";
import type { ApiError } from "../../api.ts";
import { changePassword } from "../../store.ts";

/** The smallest password the relay takes (better-auth's minPasswordLength). */
const MIN_PASSWORD = 8;

type Field = "current" | "fresh" | "again";

/** What is wrong with a field, in words. */
interface FieldError {
  field: Field;
  text: string;
}

/** What the form refuses before asking the relay, or null. */
function problemOf(current: string, fresh: string, again: string): FieldError | null {
  if (!current) return { field: "current", text: "Enter your current password" };
  if (fresh.length < MIN_PASSWORD) {
    return { field: "fresh", text: `The new password needs at least ${MIN_PASSWORD} characters` };
  }
  if (fresh !== again) return { field: "again", text: "The new passwords do not match" };
  return null;
}

/** The relay's refusal, on the field it is about. */
function refusalOf(e: ApiError): FieldError {
  return e.code === "invalid_password"
    ? { field: "current", text: "The current password is wrong" }
    : e.code === "password_too_short"
    ? { field: "fresh", text: `The new password needs at least ${MIN_PASSWORD} characters` }
    : e.code === "password_too_long"
    ? { field: "fresh", text: "The new password is too long (256 characters at most)" }
    : { field: "current", text: e.message };
}

/** Changes the password; every other browser signed in to the account is signed out. */
export function Password() {
  const [current, setCurrent] = useState("");
  const [fresh, setFresh] = useState("");
  const [again, setAgain] = useState("");
  const [error, setError] = useState<FieldError | null>(null);
  const [done, setDone] = useState(false);
  const [busy, setBusy] = useState(false);

  async function submit(ev: Event) {
    ev.preventDefault();
    setDone(false);
    const problem = problemOf(current, fresh, again);
    if (problem) return setError(problem);
    setError(null);
    setBusy(true);
    try {
      await changePassword(current, fresh);
      setCurrent("");
      setFresh("");
      setAgain("");
      setDone(true);
    } catch (err) {
      setError(refusalOf(err as ApiError));
    } finally {
      setBusy(false);
    }
  }

  const field = (name: Field, label: string, value: string, set: (v: string) => void) => (
    <PasswordField
      label={label}
      autocomplete={name === "current" ? "current-password" : "new-password"}
      value={value}
      onInput={set}
      invalid={error?.field === name}
    />
  );
  return (
    <form class="password-form" onSubmit={submit} noValidate aria-labelledby="password-title">
      <h3 id="password-title">Password</h3>
      <p class="muted small">
        Changing it signs out every other browser signed in to this account; this one stays signed
        in. API keys and runner tokens keep working.
      </p>
      <div class="password-fields">
        {field("current", "Current password", current, setCurrent)}
        {field("fresh", "New password", fresh, setFresh)}
        {field("again", "New password again", again, setAgain)}
      </div>
      {error && <p id="password-error" class="error" role="alert">{error.text}</p>}
      {done && (
        <p class="hint" role="status">
          Password changed. Every other browser was signed out.
        </p>
      )}
      <button class="btn" type="submit" disabled={busy}>
        {busy ? "Changing…" : "Change password"}
      </button>
    </form>
  );
}

/** A password input in its label; an invalid one points at the form's error line. */
function PasswordField(
  { label, autocomplete, value, onInput, invalid }: {
    label: string;
    autocomplete: "current-password" | "new-password";
    value: string;
    onInput: (value: string) => void;
    invalid: boolean;
  },
) {
  return (
    <label>
      {label}
      <input
        type="password"
        autocomplete={autocomplete}
        value={value}
        onInput={(e) => onInput(e.currentTarget.value)}
        {...(invalid ? { "aria-invalid": true, "aria-describedby": "password-error" } : {})}
      />
    </label>
  );
}
