"""A short program on the Python client generated from the demo's /openapi.json.

Creates a worker and an assistant, syncs them to the demo's sandbox channel, chats, reads the
conversation's messages, sets an identity's metadata and a memory value, and checks what the
API answered. Run by scripts/clients_check.py with the generated package on PYTHONPATH.
"""

import sys
from uuid import UUID

from parley_client import AuthenticatedClient
from parley_client.api.assistants import create_assistant
from parley_client.api.channels import sync_worker
from parley_client.api.conversation import chat
from parley_client.api.conversations import list_conversations, list_messages
from parley_client.api.identities import put_identity
from parley_client.api.memory import get_memory, put_memory
from parley_client.api.workers import create_worker
from parley_client.models import (
    ChatBody,
    CreateAssistantBody,
    CreateWorkerBody,
    PutIdentityBody,
    PutIdentityBodyMetadataType0,
    PutMemoryBody,
)


def main(base: str, key: str, channel_text: str) -> None:
    channel = UUID(channel_text)
    client = AuthenticatedClient(base_url=base, token=key, raise_on_unexpected_status=True)
    worker = create_worker.sync(client=client, body=CreateWorkerBody(name="Python worker"))
    worker_id = worker.data.worker_id
    assistant = create_assistant.sync(
        worker_id=worker_id,
        client=client,
        body=CreateAssistantBody(name="Py", instructions="You help {{identity.name}}."),
    )
    assert assistant.data.assistant_id, assistant
    sync_worker.sync(channel_id=channel, worker_id=worker_id, client=client)

    metadata = PutIdentityBodyMetadataType0.from_dict({"source": "crm", "tier": 2})
    person = put_identity.sync(
        identity_id="py-1",
        client=client,
        body=PutIdentityBody(name="Ana", phone="+351912999001", metadata=metadata),
    )
    assert person.data.metadata["source"] == "crm", person

    answer = chat.sync(
        identity_id="py-1", channel_id=channel, client=client, body=ChatBody(message="Hi, call me Mia")
    )
    assert answer.data.reply, answer
    conversations = list_conversations.sync(client=client, identity_id="py-1")
    conversation_id = conversations.data[0].id
    messages = list_messages.sync(conversation_id=conversation_id, client=client)
    assert len(messages.data) >= 2, messages

    put_memory.sync(
        identity_id="py-1",
        client=client,
        body=PutMemoryBody(key="preferences.colours", value=["teal", "amber"]),
    )
    memory = get_memory.sync(identity_id="py-1", client=client)
    values = {entry.key: entry.value for entry in memory.data}
    assert values.get("preferences.colours") == ["teal", "amber"], values
    print("python client: worker, assistant, chat, messages, metadata and memory as answered")


if __name__ == "__main__":
    main(*sys.argv[1:4])
