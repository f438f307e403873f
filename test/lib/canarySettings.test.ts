import { suite } from "uvu";
import * as assert from "uvu/assert";
import { readCanarySettings } from "../../lib/settings/canary.js";

const Settings = suite("canary settings");

Settings("on every five minutes by default; off, or another schedule, when set; a bad value names the setting", () => {
  assert.equal(readCanarySettings({}), { enabled: true, schedule: "0 */5 * * * *", audit: false, auditIntervalMinutes: 15 });
  assert.equal(readCanarySettings({ GMSA_CANARY: "false", GMSA_CANARY_SCHEDULE: "0 */1 * * * *" }), {
    enabled: false,
    schedule: "0 */1 * * * *",
    audit: false,
    auditIntervalMinutes: 15,
  });
  assert.is(readCanarySettings({ GMSA_AUDIT_INTERVAL_MINUTES: "60" }).auditIntervalMinutes, 60);
  assert.throws(() => readCanarySettings({ GMSA_AUDIT_INTERVAL_MINUTES: "0" }), /GMSA_AUDIT_INTERVAL_MINUTES/);
  assert.throws(() => readCanarySettings({ GMSA_AUDIT_INTERVAL_MINUTES: "15m" }), /GMSA_AUDIT_INTERVAL_MINUTES/);
  // Azure sets WEBSITE_HOSTNAME on a Function App: the audit checks that URL-wired webhooks call it.
  assert.is(readCanarySettings({ WEBSITE_HOSTNAME: "func-gmsa.azurewebsites.net" }).functionHost, "func-gmsa.azurewebsites.net");
  assert.is(readCanarySettings({ WEBSITE_HOSTNAME: "localhost:7071" }).functionHost, "localhost");
  assert.is(readCanarySettings({}).functionHost, undefined);
  assert.throws(() => readCanarySettings({ WEBSITE_HOSTNAME: "https://func.example/" }), /WEBSITE_HOSTNAME must be a host name/);
  assert.is(readCanarySettings({ WEBSITE_HOSTNAME: "  func-gmsa.azurewebsites.net " }).functionHost, "func-gmsa.azurewebsites.net");
  // Decoded with the other settings: every problem is named at once.
  assert.throws(
    () => readCanarySettings({ WEBSITE_HOSTNAME: "func example", GMSA_AUDIT: "sometimes" }),
    (error: Error) => ["WEBSITE_HOSTNAME must be a host name", "GMSA_AUDIT"].every((part) => error.message.includes(part)),
  );
  assert.is(readCanarySettings({ GMSA_AUDIT: "true" }).audit, true, "the audit is opt-in: it needs a read-only role of its own");
  assert.throws(() => readCanarySettings({ GMSA_AUDIT: "sometimes" }), /GMSA_AUDIT/);
  assert.throws(() => readCanarySettings({ GMSA_CANARY_SCHEDULE: "*/5 * * * *" }), /GMSA_CANARY_SCHEDULE must be a six-field NCRONTAB expression/);
  assert.throws(() => readCanarySettings({ GMSA_CANARY: "yes" }), /GMSA_CANARY/);
});

Settings.run();
