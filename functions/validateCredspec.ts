import { webhooks } from "../lib/app/webhooks.js";
import { registerWebhook } from "./webhook.js";

/** POST /validate-credspec: refuses GMSACredentialSpecs that are no Windows credential spec, warns about suspicious ones. */
registerWebhook(webhooks["validate-credspec"]);
