/**
 * The Settings page: the account (sign-out, password), runners, push
 * notifications, models and keys.
 *
 * @module
 */
import { me, signOut } from "../../store.ts";
import { Icon } from "../icon.tsx";
import { HiddenModels } from "./_hidden_models.tsx";
import { Keys } from "./_keys.tsx";
import { Notifications } from "./_notifications.tsx";
import { Password } from "./_password.tsx";
import { Runners } from "./_runners.tsx";

/** Every card of the Settings page. */
export function Settings() {
  return (
    <main class="page" aria-labelledby="settings-title">
      <h1 id="settings-title">Settings</h1>
      <Account />
      <Runners />
      <Notifications />
      <HiddenModels />
      <Keys />
    </main>
  );
}

/** Who is signed in, sign-out and the password. */
function Account() {
  return (
    <section class="card" aria-labelledby="account-title">
      <h2 id="account-title">Account</h2>
      <p>
        Signed in as <strong>{me.value?.name}</strong> ({me.value?.email})
      </p>
      <button type="button" class="btn" onClick={() => signOut()}>
        <Icon name="logout" /> Sign out
      </button>
      <Password />
    </section>
  );
}
