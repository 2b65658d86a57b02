/**
 * The baton web client: sign in, runners, sessions and a live agent
 * conversation, on a phone or a desktop.
 *
 * @module
 */
import { render } from "preact";
import { App } from "./components/app.tsx";
import { startServiceWorker } from "./push.ts";
import { loadMe } from "./store.ts";

render(<App />, document.getElementById("app")!);
loadMe();
startServiceWorker();
