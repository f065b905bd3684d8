"""EQ Reply's Python client: replies, analysis, quota, async tasks and the
verification of its webhooks. Standard library only; Python 3.9 or later.

    from eq_reply import Client
    client = Client("http://127.0.0.1:8080", "eq_live_...")
    print(client.reply("fast", "今天被老板骂了，好难过").replies[0].text)
"""

from ._client import Client, HttpResponse, Transport, urllib_transport
from ._errors import EqReplyError, TaskWaitTimeout, WebhookVerificationError
from ._records import (Analysis, ModeUnits, MonthlyVolume, Quota, Reply, ReplyResult, Task,
                       TaskCreated, TaskError, TaskWebhook)
from ._webhook import verify_webhook

__version__ = "1.0.0"

__all__ = [
    "Analysis", "Client", "EqReplyError", "HttpResponse", "ModeUnits", "MonthlyVolume", "Quota",
    "Reply", "ReplyResult", "Task", "TaskCreated", "TaskError", "TaskWaitTimeout", "TaskWebhook",
    "Transport", "WebhookVerificationError", "urllib_transport", "verify_webhook",
]
