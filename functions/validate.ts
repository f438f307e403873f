import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from "@azure/functions";
import { validatePod } from "../lib/gmsa/validatePod.js";
import { allMethods, serveWebhook, webhookAuthLevel } from "./webhook.js";

/** POST /validate: checks use, existence and contents on CREATE, freezes GMSA settings on UPDATE. */
export async function validate(request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  return serveWebhook("validate", validatePod, request, context);
}

app.http("validate", { route: "validate", methods: [...allMethods], authLevel: webhookAuthLevel(), handler: validate });
