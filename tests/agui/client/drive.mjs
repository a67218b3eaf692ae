// Drives interlock's AG-UI endpoint with the real @ag-ui/client (HttpAgent), as a front-end
// would: run, read the interrupt, resume it. Prints one JSON object with what it saw.
//
//   node drive.mjs '{"url": ..., "token": ..., "thread": ..., "command": ..., "resume": {...}}'
//
// With "race": {"server": ..., "token": ...}, the resume races a decision posted to the
// approval server's HTTP decide route by another person at the same moment.
import { HttpAgent } from "@ag-ui/client";

const config = JSON.parse(process.argv[2]);

function recorder() {
  const seen = { events: [], custom: [], errors: [], outcome: null, interrupts: [] };
  const subscriber = {
    onEvent: ({ event }) => {
      seen.events.push(event.type);
    },
    onCustomEvent: ({ event }) => {
      seen.custom.push({ name: event.name, value: event.value });
    },
    onRunErrorEvent: ({ event }) => {
      seen.errors.push({ code: event.code, message: event.message });
    },
    onRunFinishedEvent: (params) => {
      seen.outcome = params.outcome;
      if (params.outcome === "interrupt") seen.interrupts = params.interrupts;
      if (params.outcome === "success") seen.result = params.result;
    },
  };
  return { seen, subscriber };
}

async function run(agent, parameters) {
  const { seen, subscriber } = recorder();
  try {
    await agent.runAgent(parameters, subscriber);
  } catch (error) {
    seen.thrown = String(error && error.message ? error.message : error);
  }
  return seen;
}

// In a race, the decision is posted as the resume's request goes out ("sent"), or once its
// answer begins ("headers"): who wins is the race's to say; either way one decision counts.
// With "before", the resume goes out once the decision is answered: it always loses, while
// the approval server may still be continuing the thread.
let racing = null;
let decided = null;
let startRace = () => {};
const agent = new HttpAgent({
  url: config.url,
  headers: { Authorization: `Bearer ${config.token}` },
  threadId: config.thread,
  fetch: async (url, init) => {
    if (racing && config.race.after === "before") {
      startRace();
      await decided;
    }
    const answer = fetch(url, init);
    if (racing && config.race.after === "sent") startRace();
    const response = await answer;
    if (racing && config.race.after === "headers") startRace();
    return response;
  },
});
agent.addMessage({ id: `${config.thread}-u1`, role: "user", content: config.command });

const first = await run(agent, {});
const pending = agent.pendingInterrupts.map((i) => ({ ...i }));
const out = { first, pending };

if (pending.length === 1) {
  const [interrupt] = pending;
  const resume = [{ interruptId: interrupt.id, ...config.resume }];
  if (config.race) {
    let go;
    racing = new Promise((resolve) => {
      go = resolve;
    });
    startRace = () => go();
    const decide = (decided = racing.then(() => fetch(`${config.race.server}/v1/interrupts/${interrupt.id}/decision`, {
      method: "POST",
      headers: {
        Authorization: `Bearer ${config.race.token}`,
        "Content-Type": "application/json",
        "Idempotency-Key": `race-${config.thread}`,
      },
      body: JSON.stringify({
        answer: { action: "approve" },
        payload_hash: interrupt.metadata.interlock.payloadHash,
      }),
    })).then(async (response) => ({ status: response.status, body: await response.json() })));
    const [second, http] = await Promise.all([run(agent, { resume }), decide]);
    out.second = second;
    out.http = http;
  } else {
    out.second = await run(agent, { resume });
  }
  out.after = agent.pendingInterrupts.map((i) => i.id);
}

out.messages = agent.messages.map((m) => ({
  id: m.id,
  role: m.role,
  content: m.content ?? null,
  toolCalls: (m.toolCalls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments })),
  toolCallId: m.toolCallId ?? null,
}));
process.stdout.write(JSON.stringify(out));
