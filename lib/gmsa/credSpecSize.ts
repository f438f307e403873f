import { heldBytes, jsonSize, nestedDeeperThan } from "../jsonSize.js";

/**
 * The most a GMSACredentialSpec object may take for admission to read it, its metadata included:
 * 256 KiB as the API server writes it (UTF-8 JSON), 1 MiB of memory once parsed, 64 levels. A
 * Windows credential spec takes under 2 KiB, its object with the fields kubectl adds about 12 KiB
 * of memory as counted; the API server stores objects up to about 1.5 MiB, which, made of empty
 * objects, take 20 times that parsed, in an instance every cluster of a fleet shares. A larger
 * spec is answered `tooLarge` and not kept, whether it was read alone, listed or watched.
 */
export const maxCredSpecObjectBytes = 256 * 1024;
export const maxCredSpecHeldBytes = 1024 * 1024;
/** A spec nests four levels, its object with metadata about a dozen; what is kept is copied, recursively. */
export const maxCredSpecDepth = 64;

export function credSpecObjectTooLarge(object: unknown): boolean {
  return jsonSize(object) > maxCredSpecObjectBytes || nestedDeeperThan(object, maxCredSpecDepth) || heldBytes(object) > maxCredSpecHeldBytes;
}

/** The refusal's reason, after "GMSACredentialSpec "name" ". */
export const tooLargeReason = `takes more than ${maxCredSpecObjectBytes / 1024} KiB as JSON or ${maxCredSpecHeldBytes / 1024 / 1024} MiB of memory, or nests more than ${maxCredSpecDepth} levels, far more than any Windows credential spec`;
