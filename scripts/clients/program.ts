// A short program on the TypeScript types generated from the demo's /openapi.json
// (openapi-typescript), compiled with `tsc --strict`: every body below must type-check
// against the document (free-form `metadata`, a memory value of any JSON), then run with node
// against the demo. Run by scripts/clients_check.py.
import type { components } from "./parley";

type Schemas = components["schemas"];

const [base, key, channel] = process.argv.slice(2);

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const answer = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!answer.ok) {
    throw new Error(`${method} ${path}: ${answer.status} ${await answer.text()}`);
  }
  return (await answer.json()) as T;
}

function check(ok: boolean, what: string): void {
  if (!ok) {
    throw new Error(what);
  }
}

async function main(): Promise<void> {
  const workerBody: Schemas["CreateWorkerBody"] = { name: "TypeScript worker" };
  const worker = await call<Schemas["Envelope_CreatedWorker"]>("POST", "/workers", workerBody);
  const assistantBody: Schemas["CreateAssistantBody"] = {
    name: "Ts",
    instructions: "You help {{identity.name}}.",
  };
  const workerId = worker.data.worker_id;
  await call<Schemas["Envelope_CreatedAssistant"]>("POST", `/workers/${workerId}/assistants`, assistantBody);
  await call<Schemas["Envelope_ChannelRecord"]>("POST", `/channels/${channel}/worker/${workerId}`);

  const person: Schemas["PutIdentityBody"] = {
    name: "Bo",
    phone: "+351912999002",
    metadata: { source: "crm", tier: 2 },
  };
  const identity = await call<Schemas["Envelope_IdentityRecord"]>("PUT", "/identity/ts-1", person);
  check(identity.data.external_id === "ts-1", "the identity's external id");

  const said: Schemas["ChatBody"] = { message: "Hi, call me Mia", metadata: { via: "ts" } };
  const reply = await call<Schemas["Envelope_ChatData"]>("POST", `/conversation/ts-1/chat/${channel}`, said);
  check(reply.data.reply.length > 0, "a reply");
  const messages = await call<Schemas["PageResponse_MessageRecord"]>(
    "GET",
    `/conversations/${reply.data.conversation_id}/messages`,
  );
  check(messages.data.length >= 2, "the conversation's messages");

  const remembered: Schemas["PutMemoryBody"] = { key: "preferences.colours", value: ["teal", "amber"] };
  await call<Schemas["Envelope_MemoryRecord"]>("PUT", "/memory/from/ts-1", remembered);
  const memory = await call<Schemas["Envelope_Vec_MemoryRecord"]>("GET", "/memory/from/ts-1");
  const colours = memory.data.find((entry) => entry.key === "preferences.colours");
  check(JSON.stringify(colours?.value) === JSON.stringify(["teal", "amber"]), "the memory value");
  console.log("typescript types: worker, assistant, chat, messages, metadata and memory as answered");
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
