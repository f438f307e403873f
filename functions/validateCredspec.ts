import type { HttpRequest, HttpResponseInit, InvocationContext } from "@azure/functions";
import { validateCredSpecObject } from "../lib/credspec/validateCredSpecObject.js";
import { registerWebhook, serveWebhook } from "./webhook.js";

/** POST /validate-credspec: refuses GMSACredentialSpecs that are no Windows credential spec, warns about suspicious ones. */
export async function validateCredspec(request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  return serveWebhook("validate-credspec", validateCredSpecObject, request, context);
}

registerWebhook("validate-credspec", validateCredSpecObject, validateCredspec);
