import { app } from "@azure/functions";
import { admissionRuntime } from "../lib/app/runtime.js";

/**
 * Decodes the settings and builds the cluster clients when the app starts, so that a bad setting
 * stops the instance with a message that names it instead of failing admissions later.
 */
export async function startAdmission(): Promise<void> {
  await admissionRuntime();
}

app.hook.appStart(startAdmission);
