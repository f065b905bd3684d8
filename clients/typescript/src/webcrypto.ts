// Web Crypto is a global in browsers and in Node 19+; Node 18 has it only as
// node:crypto's `webcrypto`. The import is reached on Node 18 alone, and its
// name is kept out of static analysis so that bundlers for browsers leave it be.
let cached: Promise<Crypto> | undefined;

export function webCrypto(): Promise<Crypto> {
  cached ??= load();
  return cached;
}

async function load(): Promise<Crypto> {
  const global = (globalThis as { crypto?: Crypto }).crypto;
  if (global?.subtle) return global;
  const nodeCrypto = "node:crypto";
  const mod = (await import(/* @vite-ignore */ /* webpackIgnore: true */ nodeCrypto)) as {
    webcrypto?: Crypto;
  };
  if (!mod.webcrypto?.subtle) {
    throw new Error("eq-reply needs Web Crypto (crypto.subtle): a browser, or Node.js 18 or later");
  }
  return mod.webcrypto;
}
