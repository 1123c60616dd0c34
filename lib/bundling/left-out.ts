/**
 * Stands in for two packages isomorphic-git imports for commands the platform never runs: `diff3`
 * (merges) and `ignore` (.gitignore rules, read by add and status). The platform fetches, writes
 * objects and refs, and pushes. Bundles take this file in their place (ESM_ALIASES in
 * lib/constructs/worker.ts): both are CommonJS, so esbuild keeps them even though no code the
 * bundle calls reaches them, about 7 KiB. Should a future change reach one, it fails loudly.
 */
export default function leftOut(): never {
  throw new Error(
    'this isomorphic-git command needs diff3 or ignore, which the function bundles leave out (lib/bundling/left-out.ts)',
  );
}
