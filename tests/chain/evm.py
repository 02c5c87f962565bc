"""A real local EVM node (ganache from npm) and the published contracts, for the adapter tests.

Nothing here fakes JSON-RPC: ganache runs the EVM, contracts come from their npm packages
(Uniswap v3 artifacts as published, OpenZeppelin and Chainlink compiled with solc-js by
tests/evm/build.js). Transactions are sent from ganache's unlocked deterministic accounts, so
the tests need no key material. This client is deliberately plain (blocking urllib): it is
the test's independent way to drive the chain, separate from the producers' RPC client.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_abi.abi import decode, encode
from eth_utils.abi import function_signature_to_4byte_selector
from eth_utils.address import to_checksum_address

from monitor.kafka.embedded import free_port
from producers.evmcalls import call_data

EVM_DIR = Path(__file__).resolve().parent.parent / "evm"
NODE_MODULES = EVM_DIR / "node_modules"
CHAINLINK_DIR = EVM_DIR / "vendor" / "chainlink"

Q96 = 1 << 96


class EvmSetupError(RuntimeError):
    """The npm side is missing; the message says how to install it."""


def require_install() -> None:
    if not (NODE_MODULES / "ganache").is_dir() or not (CHAINLINK_DIR / "package.json").is_file():
        raise EvmSetupError(
            f"the local EVM test tools are not installed: run `bash {EVM_DIR}/install.sh` "
            "(.ci/run does this)")
    if shutil.which("node") is None:
        raise EvmSetupError("node (Node.js 20) is not on PATH")


def compile_contracts(out: Path) -> dict[str, dict[str, Any]]:
    require_install()
    subprocess.run(["node", str(EVM_DIR / "build.js"), str(out), str(CHAINLINK_DIR)],
                   check=True, capture_output=True, timeout=300)
    artifacts: dict[str, dict[str, Any]] = json.loads(out.read_text())
    for name, rel in (
        ("UniswapV3Factory", "@uniswap/v3-core/artifacts/contracts/UniswapV3Factory.sol"),
        ("UniswapV3Pool", "@uniswap/v3-core/artifacts/contracts/UniswapV3Pool.sol"),
        ("NonfungiblePositionManager",
         "@uniswap/v3-periphery/artifacts/contracts/NonfungiblePositionManager.sol"),
        ("SwapRouter", "@uniswap/v3-periphery/artifacts/contracts/SwapRouter.sol"),
    ):
        published = json.loads((NODE_MODULES / rel / f"{name}.json").read_text())
        artifacts[name] = {"abi": published["abi"], "bytecode": published["bytecode"]}
    return artifacts


def selector(signature: str) -> bytes:
    return function_signature_to_4byte_selector(signature)


def calldata(signature: str, *args: Any) -> str:
    """``"transfer(address,uint256)"`` + args -> 0x-hex call data: the adapters' own
    encoder (its type splitting was copied here). Still an independent check of it: call
    data it got wrong would revert or misread on the real contracts these tests deploy."""
    return call_data(signature, *args)


class RpcFailure(RuntimeError):
    pass


@dataclass
class Chain:
    """Blocking JSON-RPC to the node, plus deploy/transact helpers."""

    url: str
    artifacts: dict[str, dict[str, Any]]

    def rpc(self, method: str, *params: Any) -> Any:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                           "params": list(params)}).encode()
        req = urllib.request.Request(self.url, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:
            reply = json.loads(resp.read())
        if "error" in reply:
            raise RpcFailure(f"{method}: {reply['error']}")
        return reply["result"]

    @property
    def accounts(self) -> list[str]:
        result: list[str] = self.rpc("eth_accounts")
        return result

    def block_number(self) -> int:
        return int(self.rpc("eth_blockNumber"), 16)

    def send(self, sender: str, to: str | None, data: str, value: int = 0) -> dict[str, Any]:
        tx: dict[str, Any] = {"from": sender, "data": data, "gas": hex(12_000_000),
                              "value": hex(value)}
        if to is not None:
            tx["to"] = to
        tx_hash = self.rpc("eth_sendTransaction", tx)
        receipt: dict[str, Any] = self.rpc("eth_getTransactionReceipt", tx_hash)
        if int(receipt["status"], 16) != 1:
            raise RpcFailure(f"transaction reverted: {receipt}")
        return receipt

    def deploy(self, name: str, types: list[str] | None = None, args: list[Any] | None = None,
               sender: str | None = None) -> str:
        code = self.artifacts[name]["bytecode"]
        if types:
            code += encode(types, args or []).hex()
        receipt = self.send(sender or self.accounts[0], None, code)
        return to_checksum_address(receipt["contractAddress"])

    def transact(self, sender: str, to: str, signature: str, *args: Any) -> dict[str, Any]:
        return self.send(sender, to, calldata(signature, *args))

    def call(self, to: str, signature: str, returns: list[str], *args: Any,
             sender: str | None = None) -> tuple[Any, ...]:
        call: dict[str, Any] = {"to": to, "data": calldata(signature, *args)}
        if sender:
            call["from"] = sender
        raw = self.rpc("eth_call", call, "latest")
        return tuple(decode(returns, bytes.fromhex(raw[2:])))

    def mine(self, timestamp: int | None = None) -> None:
        self.rpc("evm_mine", *([timestamp] if timestamp is not None else []))

    def increase_time(self, seconds: int) -> None:
        self.rpc("evm_increaseTime", seconds)
        self.mine()

    def latest_timestamp(self) -> int:
        return int(self.rpc("eth_getBlockByNumber", "latest", False)["timestamp"], 16)


class Ganache:
    """A ganache process on a free loopback port (instant mining, deterministic accounts)."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120) -> None:
        require_install()
        log = self.log_path.open("wb")
        self._proc = subprocess.Popen(
            ["node", str(NODE_MODULES / "ganache" / "dist" / "node" / "cli.js"),
             "--server.host", "127.0.0.1", "--server.port", str(self.port),
             "--chain.chainId", "1337", "--wallet.deterministic", "--wallet.totalAccounts", "6",
             "--wallet.defaultBalance", "1000000", "--miner.blockGasLimit", "60000000",
             "--logging.quiet"],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "NODE_NO_WARNINGS": "1"})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise EvmSetupError(f"ganache exited: {self.log_path.read_text()[-2000:]}")
            try:
                Chain(self.url, {}).rpc("eth_chainId")
                return
            except OSError:
                time.sleep(0.2)  # polling a starting process, not synchronising a test
        raise EvmSetupError(f"ganache did not answer within {timeout}s")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
