import type { HttpRequest, HttpResponseInit, InvocationContext } from "@azure/functions";
import { validatePod } from "../lib/gmsa/validatePod.js";
import { podWebhook } from "../lib/gmsa/podWebhook.js";
import { registerWebhook, serveWebhook } from "./webhook.js";

const policy = podWebhook(validatePod);

/** POST /validate: checks use, existence and contents on CREATE, freezes GMSA settings on UPDATE. */
export async function validate(request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  return serveWebhook("validate", policy, request, context);
}

registerWebhook("validate", policy, validate);
