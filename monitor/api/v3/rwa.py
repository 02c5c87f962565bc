"""E3 ``GET /v3/rwa/{address}?chain=&framework_version=&grading_scheme=``: a pegged token
in the V3 graded shape.

``risk`` and ``metadata`` are the token's v2 (E6/E7 list item) envelope and fields, verbatim;
the composite scores the rwa framework (rwa_v1.toml) over the token's structural facts and
is floored by the live depeg rating (composite = max(framework, rating)). A token without a
rating is 404. 1 CU per call, like E8.
"""

from __future__ import annotations

from aiohttp import web

from ...chains import CHAINS, normalize_address
from ...framework.composite import score
from ...framework.model import load_framework
from ...framework.rwa_facts import Episode, token_facts
from ...storage import ratings_read as reads
from .. import params
from ..billing import billed
from ..context import CONFIG, DB, json_response, now
from ..rwa.routes import rated_token
from ..rwa.view import decode_snapshot, item
from .body import graded
from .pins import echoing, parse_chain, parse_pins

MAX_EPISODES = 100


@billed("E3")
async def get_v3_rwa(request: web.Request) -> web.Response:
    query = request.rel_url.query
    pins = parse_pins(query)
    with echoing(pins):
        params.known(query, ("chain", "framework_version", "grading_scheme"))
        address = normalize_address(request.match_info["address"])
        if address is None:
            raise params.bad("address", "address must be 0x followed by 40 hex digits")
        chain = parse_chain(query, CHAINS, required=False)
        db = request.app[DB]
        row = await rated_token(db, address, chain)
        snap = decode_snapshot(row)
        eps = await reads.episodes(db, row["chain"], address, MAX_EPISODES)
        tags, facts = token_facts(snap, row["peg_type"], bool(row["collapsed"]),
                                  [Episode(e["worst_tier"], e["recovered_at"] is None)
                                   for e in eps],
                                  request.app[CONFIG].model.oracle_divergence_full)
        result = score(load_framework(pins.framework_version, "rwa"), tags, facts, snap.rating,
                       pins.grading_scheme)
        metadata = item(row, snap, request.app[CONFIG].model.stale_after_seconds,
                        now(request))
        risk = metadata.pop("risk")
        return json_response(graded(result, risk, metadata), headers=pins.headers())


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v3/rwa/{address}", get_v3_rwa, allow_head=False)
