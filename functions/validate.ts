import { webhooks } from "../lib/app/webhooks.js";
import { registerWebhook } from "./webhook.js";

/** POST /validate: checks use, existence and contents on CREATE, freezes GMSA settings on UPDATE. */
registerWebhook(webhooks.validate);
