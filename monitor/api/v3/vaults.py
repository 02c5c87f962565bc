"""E8 ``GET /v3/vaults/{address}?chain=&framework_version=&grading_scheme=``: a vault in the
V3 graded shape.

``risk`` is the v2 envelope and ``metadata`` the v2 record (the E4/E5 list item without
``risk``), both verbatim from the vault store; the composite scores framework v1 over the
vault's stored facts and tags and takes max(framework, ``risk.overallRisk``). ``chain`` is
required and must be one of the nine V3 chains (else 400 ``Invalid chain``, the spec's row);
a chain the v2 store has no vault on is simply 404. 1 CU per call.
"""

from __future__ import annotations

import msgspec
from aiohttp import web

from ...framework.composite import score
from ...framework.model import load_framework
from ...storage import vaults_read as reads
from ...vaults.facts import normalize_vault_address
from .. import params
from ..billing import billed
from ..context import DB, json_response
from ..errors import ApiError
from ..vaults.view import item
from .body import graded
from .pins import V3_VAULT_CHAINS, echoing, parse_chain, parse_pins


def vault_address(raw: str, chain: str) -> str:
    """The vault engine's own address rule: 0x hex on EVM chains, base58 on sol."""
    address = normalize_vault_address(chain, raw)
    if address is None:
        raise params.bad("address", f"not a {chain} vault address (0x + 40 hex digits; "
                                    "base58 on sol)")
    return address


@billed("E8")
async def get_v3_vault(request: web.Request) -> web.Response:
    query = request.rel_url.query
    pins = parse_pins(query)
    with echoing(pins):
        params.known(query, ("chain", "framework_version", "grading_scheme"))
        chain = parse_chain(query, V3_VAULT_CHAINS, required=True)
        assert chain is not None
        address = vault_address(request.match_info["address"], chain)
        vault = await reads.get_vault(request.app[DB], chain, address)
        if vault is None:
            raise ApiError(404, "unknown vault", address=address, chain=chain)
        metadata = item(vault)
        risk = metadata.pop("risk")
        # Upstream = risk.overallRisk (the spec's rule); null for an unrated vault, which then
        # gets the framework composite alone. The envelope passes through as the published
        # bytes (msgspec.Raw); it is decoded here only to read that one number.
        envelope = msgspec.json.decode(risk) if isinstance(risk, msgspec.Raw) else risk
        upstream = envelope.get("overallRisk") if isinstance(envelope, dict) else None
        result = score(load_framework(pins.framework_version, "vault"), set(vault.tags),
                       vault.facts, float(upstream) if upstream is not None else None,
                       pins.grading_scheme)
        return json_response(graded(result, risk, metadata), headers=pins.headers())


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v3/vaults/{address}", get_v3_vault, allow_head=False)
