"""What a GKE cluster costs an hour, from the list prices shipped in ``gke_prices.json``.

The table holds one region's on-demand and Spot prices (USD per hour) and its date: the machine types tfcli
proposes (E2, N2, N1, C3; G2, A2 and A3, whose prices include their L4, A100 or H100 GPUs), N1 custom machines
(``custom-CPUS-MEMORY_MB``, priced per vCPU and per GB), T4s attached to N1 machines (per GPU), and GKE Standard's
cluster management fee. It is a snapshot to be refreshed, not a quote: ``Estimate.table`` says so, and anything
the table cannot price is shown as unknown (with a note) instead of being guessed.

``estimate`` prices a cluster: ``num_nodes`` machines of ``machine_type``; with GPUs, ``gpu_nodes`` more of the
GPU pool's machine (``gpu_machine_type``, by default the one that carries ``gpus_per_node`` GPUs of ``gpu_type``)
and, for T4s, the T4s attached to each GPU node; plus the management fee. ``gpu_machine_type`` names the machine
a GPU pool needs for a number of GPUs per node.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from torchforce.spec import SpecError

PRICES_FILE = "gke_prices.json"
CUSTOM = re.compile(r"custom-(\d+)-(\d+)")  # an N1 custom machine: vCPUs and memory in MB


@dataclass(frozen=True)
class Prices:
    """The shipped price table (see ``gke_prices.json``): USD per hour, on demand and Spot, in ``region``."""

    region: str
    date: str
    note: str
    management_fee: float
    machines: dict[str, dict[str, float]]
    machine_notes: dict[str, str]
    custom: dict[str, dict[str, float]]  # N1 custom machines: "vcpu" and "memory_gb", each on_demand and spot
    gpus: dict[str, dict[str, Any]]

    def machine_price(self, machine_type: str, spot: bool = False) -> float | None:
        """The price of one machine an hour, or None when the table has none."""
        kind = "spot" if spot else "on_demand"
        if machine_type in self.machines:
            return float(self.machines[machine_type][kind])
        custom = CUSTOM.fullmatch(machine_type)
        if custom is None:
            return None
        vcpus, memory_mb = int(custom.group(1)), int(custom.group(2))
        return vcpus * self.custom["vcpu"][kind] + memory_mb / 1024 * self.custom["memory_gb"][kind]

    def gpu_price(self, gpu_type: str, spot: bool = False) -> float | None:
        """The price of one attached GPU an hour (T4s), or None (GPUs that come with their machine, retired ones)."""
        per_gpu = self.gpus.get(gpu_type, {}).get("per_gpu")
        return None if per_gpu is None else float(per_gpu["spot" if spot else "on_demand"])


@functools.cache
def load_prices() -> Prices:
    """The price table shipped with torchforce (read once)."""
    data = json.loads(resources.files("torchforce.client").joinpath(PRICES_FILE).read_text(encoding="utf-8"))
    return Prices(
        region=data["region"],
        date=data["date"],
        note=data["note"],
        management_fee=float(data["management_fee"]["per_hour"]),
        machines=data["machines"],
        machine_notes=data.get("machine_notes", {}),
        custom=data["n1_custom"],
        gpus=data["gpus"],
    )


Line = tuple[str, int, float | None, float | None]  # what, count, unit price, subtotal (None: price unknown)


@dataclass(frozen=True)
class Estimate:
    """A cluster's cost an hour: ``per_hour`` sums the lines whose price is known; ``lines`` are (what, count,
    unit price, subtotal), the prices None where the table has none; ``notes`` say what the sum leaves out."""

    per_hour: float
    lines: list[Line]
    region: str
    date: str
    spot: bool
    notes: list[str] = field(default_factory=list)

    @property
    def unknown(self) -> bool:
        """Whether some line has no price (the total is then too low)."""
        return any(subtotal is None for _, _, _, subtotal in self.lines)

    def table(self) -> str:
        """The lines as a small aligned table, the total, where the prices come from, then the notes."""
        rows = [("Item", "Count", "$/h each", "$/h")]  # US dollars an hour
        for what, count, unit, subtotal in self.lines:
            rows.append((what, str(count), "?" if unit is None else f"{unit:.4f}", _money(subtotal)))
        rows.append(("Total" + (" (known prices only)" if self.unknown else ""), "", "", f"${self.per_hour:.4f}"))
        widths = [max(len(row[column]) for row in rows) for column in range(4)]
        text = [
            "  ".join(
                [row[0].ljust(widths[0]), *(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))]
            )
            for row in rows
        ]
        text.insert(-1, "-" * len(text[0]))
        text.append(f"{'spot ' if self.spot else ''}list prices of {self.region}, {self.date}; not a quote")
        text += [f"- {note}" for note in self.notes]
        return "\n".join(line.rstrip() for line in text)


def _money(value: float | None) -> str:
    return "?" if value is None else f"{value:.4f}"


def _gpu_entry(gpu_type: str, prices: Prices) -> dict[str, Any]:
    entry = prices.gpus.get(gpu_type)
    if entry is None:
        raise SpecError(
            "cluster.gpu_type", "unknown GPU type", got=gpu_type, expected="one of " + ", ".join(_offered(prices))
        )
    if entry.get("retired"):
        raise SpecError(
            "cluster.gpu_type",
            f"the {entry['name']} is retired on Google Cloud (no price, no node pools)",
            got=gpu_type,
            expected="one of " + ", ".join(_offered(prices)),
        )
    return entry


def _offered(prices: Prices) -> list[str]:
    return [name for name, entry in prices.gpus.items() if not entry.get("retired")]


def _counts(entry: dict[str, Any]) -> list[int]:
    return [int(count) for count in entry.get("counts", entry.get("machine_types", {}))]


def gpu_machine_type(gpu_type: str, count: int) -> str:
    """The machine type of a node pool with ``count`` GPUs of ``gpu_type`` per node: T4s attach to an N1 machine
    (``n1-standard-4``); L4s come with G2 machines, A100s with A2 and H100s with A3 ones. A SpecError for a count
    that is not offered (T4: 1, 2 or 4; the others 1, 2, 4 or 8), or a GPU type that is unknown or retired."""
    return _machine_for(gpu_type, count, load_prices())


def spot_only(machine_type: str) -> bool:
    """Whether Google offers ``machine_type`` only as Spot (or flex-start) VMs, as the price table's note on it
    says (the H100 shapes of fewer than 8 GPUs)."""
    return "only as Spot" in load_prices().machine_notes.get(machine_type, "")


def _machine_for(gpu_type: str, count: int, prices: Prices) -> str:
    entry = _gpu_entry(gpu_type, prices)
    counts = _counts(entry)
    if isinstance(count, bool) or not isinstance(count, int) or count not in counts:
        raise SpecError(
            "cluster.gpus_per_node",
            f"{entry['name']} nodes are not offered with this many GPUs",
            got=count,
            expected=", ".join(map(str, counts[:-1])) + f" or {counts[-1]}",
        )
    return str(entry["machine_type"]) if entry.get("attached") else str(entry["machine_types"][str(count)])


def estimate(
    machine_type: str,
    num_nodes: int,
    *,
    gpu_type: str | None = None,
    gpus_per_node: int = 0,
    gpu_nodes: int = 0,
    gpu_machine_type: str | None = None,
    spot: bool = False,
    region: str | None = None,
    management_fee: bool = True,
) -> Estimate:
    """What a cluster costs an hour at the table's list prices: ``num_nodes`` machines of ``machine_type``; with
    ``gpu_type`` and ``gpus_per_node``, ``gpu_nodes`` GPU nodes: machines of ``gpu_machine_type`` (by default
    the one that carries those GPUs; T4s without one attach to the ``machine_type`` nodes, adding no machine), plus
    for T4s ``gpus_per_node`` attached T4s each; and GKE's management fee (unless ``management_fee`` is False, for a
    node pool priced on its own). Prices the table lacks are unknown lines with a note, never guessed; a
    ``region`` other than the table's gets a note that the prices are the table region's."""
    prices = load_prices()
    lines: list[Line] = []
    notes: list[str] = []

    def machines(what: str, count: int) -> None:
        unit = prices.machine_price(what, spot)
        if unit is None:
            notes.append(f"no price for machine type {what!r} in the table: not counted in the total")
        elif what in prices.machine_notes and count:
            notes.append(f"{what}: {prices.machine_notes[what]}")
        lines.append((what + (" (spot)" if spot else ""), count, unit, None if unit is None else unit * count))

    machines(machine_type, num_nodes)
    if gpu_type and gpus_per_node and gpu_nodes:
        attached = prices.gpu_price(gpu_type, spot)  # per GPU: T4s; None for GPUs that come with their machine
        if gpu_machine_type is None and attached is None:
            try:
                gpu_machine_type = _machine_for(gpu_type, gpus_per_node, prices)
            except SpecError as error:
                notes.append(f"no price for the {gpu_type} nodes ({gpus_per_node} GPUs each): {error.message}")
                lines.append((f"{gpu_type} node", gpu_nodes, None, None))
        if gpu_machine_type is not None:
            machines(gpu_machine_type, gpu_nodes)
        if attached is not None:
            count = gpus_per_node * gpu_nodes
            what = f"{prices.gpus[gpu_type]['name']}, attached" + (" (spot)" if spot else "")
            lines.append((what, count, attached, attached * count))
    if management_fee:
        lines.append(("GKE cluster management fee", 1, prices.management_fee, prices.management_fee))
    if region is not None and region != prices.region:
        notes.append(f"the prices are {prices.region}'s: {region}'s differ")
    if spot:
        notes.append("Spot prices change (as often as daily) and Spot nodes can be taken back at any time")
    per_hour = float(sum(subtotal for _, _, _, subtotal in lines if subtotal is not None))
    return Estimate(per_hour, lines, prices.region, prices.date, spot, list(dict.fromkeys(notes)))
