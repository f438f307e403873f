import { app } from "@azure/functions";
import { admissionRuntime } from "./runtime.js";

// Decode the settings and build the cluster clients when the app starts, so that a bad
// setting stops the instance with a message that names it instead of failing admissions later.
app.hook.appStart(async () => {
  await admissionRuntime();
});
