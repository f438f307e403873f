import { webhooks } from "../lib/app/webhooks.js";
import { registerWebhook } from "./webhook.js";

/** POST /mutate: inlines the named credential specs' contents into the pod. */
registerWebhook(webhooks.mutate);
