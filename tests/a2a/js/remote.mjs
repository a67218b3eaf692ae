// A remote A2A agent built only with the JavaScript SDK (@a2a-js/sdk): the twin of the
// Deployer in ../_remote.py. A new task goes auth-required with a text part (the question) and
// a data part (the call it wants approved); an answer that approves (true, "approve", or
// {"approved": true}) completes it with an artifact, any other rejects it.
//
// `node remote.mjs` serves on a free loopback port and prints `serving on URL`; GET /counts
// answers {"created": [[task, context, request]...], "answers": [[task, texts, data]...]}.
import { randomUUID } from "node:crypto";

import { AGENT_CARD_PATH, Role, TaskState } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore } from "@a2a-js/sdk/server";
import { UserBuilder, agentCardHandler, jsonRpcHandler } from "@a2a-js/sdk/server/express";
import express from "express";

const QUESTION = "Approve deploying web to prod?";
const APPROVAL = { type: "approval", tool: "deploy", arguments: { service: "web", env: "prod" } };
const created = [];
const answers = [];

function part(kind, value) {
  return { content: { $case: kind, value }, metadata: undefined, filename: "", mediaType: "" };
}

function agentMessage(taskId, contextId, parts) {
  return {
    messageId: randomUUID(),
    contextId,
    taskId,
    role: Role.ROLE_AGENT,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

function status(taskId, contextId, state, message) {
  const timestamp = new Date().toISOString();
  return AgentEvent.statusUpdate({
    taskId,
    contextId,
    status: { state, message, timestamp },
    metadata: undefined,
  });
}

function partsOf(message, kind) {
  return message.parts.filter((p) => p.content?.$case === kind).map((p) => p.content.value);
}

function approves(texts, data) {
  return (
    texts.some((t) => t.trim().toLowerCase() === "approve") ||
    data.some((d) => d === true || (d !== null && typeof d === "object" && d.approved === true))
  );
}

const executor = {
  async execute(ctx, bus) {
    const { taskId, contextId } = ctx;
    const texts = partsOf(ctx.userMessage, "text");
    const data = partsOf(ctx.userMessage, "data");
    if (!ctx.task) {
      const submitted = { state: TaskState.TASK_STATE_SUBMITTED, message: undefined };
      bus.publish(
        AgentEvent.task({
          id: taskId,
          contextId,
          status: { ...submitted, timestamp: new Date().toISOString() },
          artifacts: [],
          history: [ctx.userMessage],
          metadata: undefined,
        }),
      );
      created.push([taskId, contextId, texts.join("\n")]);
      const ask = agentMessage(taskId, contextId, [part("text", QUESTION), part("data", APPROVAL)]);
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_AUTH_REQUIRED, ask));
      bus.finished();
      return;
    }
    bus.publish(AgentEvent.task(ctx.task)); // every execution starts with the task
    answers.push([taskId, texts, data]);
    if (approves(texts, data)) {
      const artifact = {
        artifactId: randomUUID(),
        name: "deploy",
        description: "",
        parts: [part("text", "deployed web to prod")],
        metadata: undefined,
        extensions: [],
      };
      bus.publish(
        AgentEvent.artifactUpdate({
          taskId,
          contextId,
          artifact,
          append: false,
          lastChunk: true,
          metadata: undefined,
        }),
      );
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_COMPLETED, undefined));
    } else {
      const reason = texts.join(" ") || "no reason given";
      const refusal = agentMessage(taskId, contextId, [part("text", `refused: ${reason}`)]);
      bus.publish(status(taskId, contextId, TaskState.TASK_STATE_REJECTED, refusal));
    }
    bus.finished();
  },
  async cancelTask() {
    throw new Error("the deployer cannot be cancelled");
  },
};

const card = {
  name: "deployer",
  description: "Deploys services, once its caller approves.",
  version: "1.0.0",
  supportedInterfaces: [{ url: "", protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" }],
  capabilities: { streaming: false, pushNotifications: false, extensions: [], extendedAgentCard: false },
  defaultInputModes: ["text/plain", "application/json"],
  defaultOutputModes: ["text/plain"],
  skills: [
    {
      id: "deploy",
      name: "deploy",
      description: "Deploy a service.",
      tags: ["ops"],
      examples: [],
      inputModes: [],
      outputModes: [],
      securityRequirements: [],
    },
  ],
  securitySchemes: {},
  securityRequirements: [],
  signatures: [],
  provider: undefined,
  documentationUrl: "",
  iconUrl: "",
};

const handler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
const app = express();
app.get("/counts", (req, res) => res.json({ created, answers }));
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: handler }));
app.use("/", jsonRpcHandler({ requestHandler: handler, userBuilder: UserBuilder.noAuthentication }));
const server = app.listen(0, "127.0.0.1", () => {
  const url = `http://127.0.0.1:${server.address().port}`;
  card.supportedInterfaces[0].url = url; // known once the port is
  console.log(`serving on ${url}`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
