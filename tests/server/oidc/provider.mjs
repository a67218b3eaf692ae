// A real OpenID provider (the `oidc-provider` package) for the single sign-on tests.
//
// Usage: node provider.mjs SETUP.json
//
// SETUP.json holds {"accounts": {id: claims}}. The provider listens on a free loopback port
// and prints one line of JSON, {"issuer": URL}, once it does; it runs until its standard input
// closes (the test that started it ends). Each server under test registers itself as a client
// (dynamic registration, RFC 7591, open to anyone here) with its own callback URL.
//
// Its login page asks only for the account's id (no password): the tests are about the
// relying party. Consent is implied for every client, as for a company's own applications.
//
// For the tests of the relying party's refusals, `POST /test/next-id-token` with {"mode": ...}
// makes the next token response carry a bad ID token: "forged" (signed by another key under the
// provider's key id), "expired" (signed by the provider, expired an hour ago) or
// "wrong-audience" (signed by the provider, issued to another client).

import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { exportJWK, generateKeyPair, decodeJwt, decodeProtectedHeader, SignJWT } from "jose";
import Provider from "oidc-provider";

const setup = JSON.parse(readFileSync(process.argv[2], "utf8"));
const accounts = setup.accounts ?? {};

async function signingKey(kid) {
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  return { privateKey, jwk: { ...(await exportJWK(privateKey)), kid, alg: "RS256", use: "sig" } };
}

const real = await signingKey("provider-key");
const impostor = await signingKey("provider-key");
let tamper = null; // what to do to the next ID token issued, if anything

function escape(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(res, status, title, body) {
  res.writeHead(status, { "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-store" });
  res.end(`<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escape(title)}</title></head><body>${body}</body></html>`);
}

async function readForm(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString("utf8"));
}

async function reSign(token, mode) {
  const claims = decodeJwt(token);
  const header = decodeProtectedHeader(token);
  const now = Math.floor(Date.now() / 1000);
  let key = real.privateKey;
  if (mode === "forged") key = impostor.privateKey;
  else if (mode === "expired") Object.assign(claims, { iat: now - 7200, exp: now - 3600 });
  else if (mode === "wrong-audience") Object.assign(claims, { aud: "another-client", azp: undefined });
  else throw new Error(`unknown tamper mode ${mode}`);
  return new SignJWT(claims).setProtectedHeader({ alg: header.alg, kid: header.kid, typ: header.typ }).sign(key);
}

const server = createServer();
server.listen(0, "127.0.0.1", () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, {
    clients: setup.clients ?? [],
    jwks: { keys: [real.jwk] },
    cookies: { keys: ["interlock-test-provider"] },
    claims: {
      openid: ["sub"],
      email: ["email", "email_verified"],
      profile: ["name", "preferred_username"],
      groups: ["groups"],
      roles: ["roles"],
    },
    pkce: { required: () => true },
    features: { devInteractions: { enabled: false }, registration: { enabled: true } },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    async findAccount(ctx, id) {
      if (!Object.hasOwn(accounts, id)) return undefined;
      return { accountId: id, claims: async () => ({ ...accounts[id], sub: id }) };
    },
    async loadExistingGrant(ctx) {
      const grant = new ctx.oidc.provider.Grant({
        clientId: ctx.oidc.client.clientId,
        accountId: ctx.oidc.session.accountId,
      });
      grant.addOIDCScope(ctx.oidc.params.scope ?? "openid");
      await grant.save();
      return grant;
    },
  });

  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path === "/token" && tamper && ctx.body?.id_token) {
      const mode = tamper;
      tamper = null;
      ctx.body = { ...ctx.body, id_token: await reSign(ctx.body.id_token, mode) };
    }
  });

  const callback = provider.callback();
  server.on("request", async (req, res) => {
    const url = new URL(req.url, issuer);
    try {
      if (url.pathname === "/test/next-id-token" && req.method === "POST") {
        tamper = (await readForm(req)).get("mode");
        res.writeHead(204).end();
        return;
      }
      const login = url.pathname.match(/^\/interaction\/([^/]+)(\/login)?$/);
      if (login) {
        const details = await provider.interactionDetails(req, res);
        if (login[2] && req.method === "POST") {
          const account = (await readForm(req)).get("account") ?? "";
          if (!Object.hasOwn(accounts, account)) {
            page(res, 200, "Sign in", `<p role="alert">No such account.</p><a href="/interaction/${escape(details.uid)}">Try again</a>`);
            return;
          }
          await provider.interactionFinished(req, res, { login: { accountId: account } }, { mergeWithLastSubmission: false });
          return;
        }
        page(
          res,
          200,
          "Sign in · test provider",
          `<h1>Test provider</h1><form method="post" action="/interaction/${escape(details.uid)}/login">` +
            `<label for="account">Account</label> <input id="account" name="account" autocomplete="off" required>` +
            ` <button type="submit">Continue</button></form>`,
        );
        return;
      }
      callback(req, res);
    } catch (error) {
      page(res, 500, "Error", `<pre>${escape(error.stack ?? error)}</pre>`);
    }
  });
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});

// The test that started this process keeps its standard input open; when it closes, stop.
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
