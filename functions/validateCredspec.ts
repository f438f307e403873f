import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from "@azure/functions";
import { validateCredSpecObject } from "../lib/credspec/validateCredSpecObject.js";
import { allMethods, serveWebhook, webhookAuthLevel } from "./webhook.js";

/** POST /validate-credspec: refuses GMSACredentialSpecs that are no Windows credential spec, warns about suspicious ones. */
export async function validateCredspec(request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  return serveWebhook("validate-credspec", validateCredSpecObject, request, context);
}

app.http("validate-credspec", { route: "validate-credspec", methods: [...allMethods], authLevel: webhookAuthLevel(), handler: validateCredspec });
