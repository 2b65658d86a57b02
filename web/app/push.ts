/**
 * This browser's side of push notifications: the service worker
 * (`/sw.js`, which shows them and opens their session on tap) and the
 * device's subscription at the relay. docs/push.md tells what is sent.
 *
 * @module
 */
import type {
  PushSubscribeResponse,
  PushSubscriptionsResponse,
  VapidPublicKeyResponse,
} from "../../shared/api.ts";
import { api } from "./api.ts";
import { navigate } from "./route.ts";

/** Whether this browser can receive push (it needs a secure context: https or localhost). */
export function pushSupported(): boolean {
  return isSecureContext && "serviceWorker" in navigator && "PushManager" in globalThis &&
    "Notification" in globalThis;
}

/** Registers the service worker; a tap on a notification opens its session in this tab. */
export function startServiceWorker(): void {
  if (!("serviceWorker" in navigator) || !isSecureContext) return;
  navigator.serviceWorker.register("/sw.js").catch(() => {/* no push in this browser */});
  navigator.serviceWorker.addEventListener("message", (ev) => {
    const msg = ev.data as { t?: string; url?: string } | null;
    if (msg?.t === "open" && typeof msg.url === "string" && msg.url.startsWith("/")) {
      navigate(msg.url);
    }
  });
}

function keyBytes(base64url: string): Uint8Array<ArrayBuffer> {
  const b64 = base64url.replace(/-/g, "+").replace(/_/g, "/");
  const bin = atob(b64 + "=".repeat((4 - b64.length % 4) % 4));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}

/** This device's current push subscription, if any. */
export async function currentSubscription(): Promise<PushSubscription | null> {
  if (!pushSupported()) return null;
  const reg = await navigator.serviceWorker.getRegistration("/");
  return (await reg?.pushManager.getSubscription()) ?? null;
}

/** Asks for permission, subscribes this device and registers it at the relay. */
export async function subscribeDevice(enabledEvents: string): Promise<string> {
  if (await Notification.requestPermission() !== "granted") {
    throw new Error("Notifications are blocked for this site in the browser's settings");
  }
  const reg = await navigator.serviceWorker.register("/sw.js");
  await navigator.serviceWorker.ready;
  const { publicKey } = await api<VapidPublicKeyResponse>("/api/push/vapid-public-key");
  let sub = await reg.pushManager.getSubscription();
  // One made with another key (the relay's keys changed) cannot be used.
  const key = sub?.options.applicationServerKey;
  if (
    sub && key && btoa(String.fromCharCode(...new Uint8Array(key))) !== btoa(
        String.fromCharCode(...keyBytes(publicKey)),
      )
  ) {
    await sub.unsubscribe();
    sub = null;
  }
  sub ??= await reg.pushManager.subscribe({
    userVisibleOnly: true,
    applicationServerKey: keyBytes(publicKey),
  });
  const json = sub.toJSON() as { endpoint: string; keys: { p256dh: string; auth: string } };
  await api<PushSubscribeResponse>("/api/push/subscribe", {
    method: "POST",
    body: { endpoint: json.endpoint, keys: json.keys, enabledEvents },
  });
  return json.endpoint;
}

/** Stops notifications on this device (at the relay and in the browser). */
export async function unsubscribeDevice(): Promise<void> {
  const sub = await currentSubscription();
  if (!sub) return;
  await api("/api/push/unsubscribe", { method: "POST", body: { endpoint: sub.endpoint } });
  await sub.unsubscribe();
}

/** The account's subscriptions (one per device). */
export async function listSubscriptions(): Promise<PushSubscriptionsResponse["subscriptions"]> {
  return (await api<PushSubscriptionsResponse>("/api/push/subscriptions")).subscriptions;
}
