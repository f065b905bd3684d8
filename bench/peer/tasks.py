"""The peer's Celery side: two tasks returning canned answers.

What a Python team would write: Celery on the same RabbitMQ node as EQ Reply
(EQ_AMQP_URL), the `rpc://` result backend (results come back over AMQP, no
extra store), prefork pool. Run by bench/run as
    celery -A tasks worker --pool prefork --concurrency 2
"""
import os

from celery import Celery

import canned

app = Celery("peer", broker=os.environ["EQ_AMQP_URL"], backend="rpc://")
app.conf.update(
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    # The canned answer is the whole job: keep the defaults a team would
    # keep, except what would only add log noise.
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)


@app.task(name="peer.reply")
def reply(request):
    # The request is validated by the API; the answer is canned.
    return dict(canned.REPLY, mode=request.get("mode", "fast"))


@app.task(name="peer.analyze")
def analyze(request):
    return canned.ANALYSIS
