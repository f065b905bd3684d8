"""The peer's HTTP side: FastAPI on uvicorn, the same routes, bodies and
envelope as EQ Reply's POST /api/v1/reply and POST /api/v1/analyze, with an
API-key check (the key in EQ_BENCH_KEY) and request validation by pydantic.

Each request sends a Celery task and waits for its result (`rpc://`), as an
afternoon's FastAPI + Celery service would. Endpoints are plain `def`, so
FastAPI runs them on its thread pool and the blocking `.get()` does not stall
the event loop. Run by bench/run as
    uvicorn app:app --workers 2
"""
import hmac
import os
import uuid
from typing import Optional

from fastapi import FastAPI, Header
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

import tasks

API_KEY = os.environ["EQ_BENCH_KEY"].encode()
TIMEOUT_S = 30

app = FastAPI()


class ReplyRequest(BaseModel):
    mode: str = Field("fast", regex="^(fast|standard|perfect)$")
    message: str = Field(..., min_length=1, max_length=2000)
    scene: Optional[str] = None
    reply_count: int = Field(3, ge=1, le=5)


class AnalyzeRequest(BaseModel):
    message: str = Field(..., min_length=1, max_length=2000)


def unauthorized():
    return JSONResponse({"code": 401, "msg": "invalid api key"}, status_code=401)


def authorized(header):
    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[7:].encode(), API_KEY)


@app.post("/api/v1/reply")
def reply(body: ReplyRequest, authorization: Optional[str] = Header(None)):
    if not authorized(authorization):
        return unauthorized()
    data = tasks.reply.delay(body.dict()).get(timeout=TIMEOUT_S)
    data["request_id"] = "req_" + uuid.uuid4().hex
    return {"code": 0, "data": data, "msg": "ok"}


@app.post("/api/v1/analyze")
def analyze(body: AnalyzeRequest, authorization: Optional[str] = Header(None)):
    if not authorized(authorization):
        return unauthorized()
    data = tasks.analyze.delay(body.dict()).get(timeout=TIMEOUT_S)
    return {"code": 0, "data": data, "msg": "ok"}
