/**
 * A credential spec name is user input that becomes part of an API request path, so it must be
 * a valid object name (a DNS-1123 subdomain) before anything is looked up.
 */
const maxLength = 253;
const label = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const subdomain = new RegExp(`^${label}(\\.${label})*$`);

export function credSpecNameProblem(name: string): string | undefined {
  if (name.length === 0) return "it is empty";
  if (name.length > maxLength) return `it is longer than ${maxLength} characters`;
  if (!subdomain.test(name)) {
    return "it must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
  }
  return undefined;
}
