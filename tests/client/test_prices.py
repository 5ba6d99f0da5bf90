"""The GKE price table and the cluster estimates made from it (``torchforce.client.prices``)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from torchforce.client.prices import Estimate, estimate, gpu_machine_type, load_prices
from torchforce.spec import SpecError

FEE = 0.10


def table_file() -> dict:
    return json.loads(resources.files("torchforce.client").joinpath("gke_prices.json").read_text())


def machine(name: str, spot: bool = False) -> float:
    return table_file()["machines"][name]["spot" if spot else "on_demand"]


def test_the_table_ships_with_the_package_and_says_what_it_is():
    data = table_file()  # importlib.resources finds it: it is package data
    assert data["region"] == "us-central1" and data["date"] == "2026-11"
    assert "not a quote" in data["note"] and "refresh" in data["note"]
    assert data["management_fee"]["per_hour"] == FEE
    for name in [f"e2-standard-{n}" for n in (2, 4, 8, 16)] + [f"n2-standard-{n}" for n in (2, 4, 8, 16, 32)]:
        assert name in data["machines"]
    for name in [f"n1-standard-{n}" for n in (1, 2, 4, 8, 16)] + [f"c3-standard-{n}" for n in (4, 8, 22)]:
        assert name in data["machines"]
    for name in [f"g2-standard-{n}" for n in (4, 8, 12, 16)] + ["a2-highgpu-1g", "a2-highgpu-2g", "a3-highgpu-8g"]:
        assert name in data["machines"]
    for prices in data["machines"].values():  # Spot is cheaper than on demand, and both are prices
        assert 0 < prices["spot"] < prices["on_demand"]
    assert load_prices() is load_prices()  # read once
    assert load_prices().region == "us-central1"


def test_a_cpu_cluster_of_n1_custom_machines():
    data = table_file()["n1_custom"]
    # custom-6-23040: 6 vCPUs and 22.5 GB
    per_node = 6 * data["vcpu"]["on_demand"] + 22.5 * data["memory_gb"]["on_demand"]
    got = estimate("custom-6-23040", 3)
    assert got.per_hour == pytest.approx(3 * per_node + FEE)
    assert got.lines[0] == ("custom-6-23040", 3, pytest.approx(per_node), pytest.approx(3 * per_node))
    assert got.lines[-1] == ("GKE cluster management fee", 1, FEE, FEE)
    assert not got.unknown and not got.notes and not got.spot
    pool = estimate("custom-6-23040", 3, management_fee=False)  # a node pool on its own: no fee
    assert pool.per_hour == pytest.approx(3 * per_node) and len(pool.lines) == 1


def test_a_g2_pool_carries_its_l4s_and_a_t4_pool_adds_its_gpus():
    got = estimate("e2-standard-4", 1, gpu_type="nvidia-l4", gpus_per_node=2, gpu_nodes=3)
    assert [line[0] for line in got.lines] == ["e2-standard-4", "g2-standard-24", "GKE cluster management fee"]
    assert got.per_hour == pytest.approx(machine("e2-standard-4") + 3 * machine("g2-standard-24") + FEE)
    assert any("includes its NVIDIA L4s (2)" in note for note in got.notes)
    # T4s in a pool of N1 machines: the machine and each node's T4s
    t4 = table_file()["gpus"]["nvidia-tesla-t4"]["per_gpu"]["on_demand"]
    got = estimate(
        "e2-standard-4", 1, gpu_type="nvidia-tesla-t4", gpus_per_node=4, gpu_nodes=2, gpu_machine_type="n1-standard-8"
    )
    expected = machine("e2-standard-4") + 2 * machine("n1-standard-8") + 2 * 4 * t4 + FEE
    assert got.per_hour == pytest.approx(expected)
    assert got.lines[2] == ("NVIDIA T4, attached", 8, t4, pytest.approx(8 * t4))
    # without a GPU machine, T4s attach to the cluster's own nodes
    got = estimate("n1-standard-4", 2, gpu_type="nvidia-tesla-t4", gpus_per_node=1, gpu_nodes=2)
    assert got.per_hour == pytest.approx(2 * machine("n1-standard-4") + 2 * t4 + FEE)


def test_spot_prices_and_another_region():
    got = estimate("n2-standard-8", 4, gpu_type="nvidia-tesla-a100", gpus_per_node=1, gpu_nodes=2, spot=True)
    expected = 4 * machine("n2-standard-8", True) + 2 * machine("a2-highgpu-1g", True) + FEE  # the fee is not Spot
    assert got.per_hour == pytest.approx(expected) and got.spot
    assert got.lines[0][0] == "n2-standard-8 (spot)"
    assert any("Spot prices change" in note for note in got.notes)
    assert not any("us-central1's" in note for note in got.notes)
    other = estimate("n2-standard-8", 4, region="europe-west4")
    assert other.per_hour == pytest.approx(4 * machine("n2-standard-8") + FEE)
    assert "the prices are us-central1's: europe-west4's differ" in other.notes


def test_an_unknown_machine_is_an_unknown_line_not_a_guess():
    got = estimate("m1-ultramem-40", 2, gpu_type="nvidia-l4", gpus_per_node=1, gpu_nodes=1)
    assert got.unknown
    assert got.lines[0] == ("m1-ultramem-40", 2, None, None)
    assert got.per_hour == pytest.approx(machine("g2-standard-4") + FEE)  # what is known, said to be so
    assert "no price for machine type 'm1-ultramem-40' in the table: not counted in the total" in got.notes
    table = got.table()
    assert "m1-ultramem-40" in table and "Total (known prices only)" in table
    for odd in ("custom-4-15360-ext", "n2-custom-4-8192", ""):  # extended memory, other families: not priced
        assert estimate(odd, 1).unknown
    # a retired or unoffered GPU shape: an unknown line and a note, no exception
    retired = estimate("e2-standard-4", 1, gpu_type="nvidia-tesla-k80", gpus_per_node=1, gpu_nodes=1)
    assert retired.unknown and any("retired" in note for note in retired.notes)
    assert estimate("e2-standard-4", 1, gpu_type="nvidia-l4", gpus_per_node=3, gpu_nodes=1).unknown


def test_the_table_text():
    got = estimate("e2-standard-4", 2, gpu_type="nvidia-h100-80gb", gpus_per_node=8, gpu_nodes=1)
    lines = got.table().splitlines()
    assert lines[0].split() == ["Item", "Count", "$/h", "each", "$/h"]
    assert lines[1].split() == [
        "e2-standard-4",
        "2",
        f"{machine('e2-standard-4'):.4f}",
        f"{2 * machine('e2-standard-4'):.4f}",
    ]
    assert lines[2].split()[:2] == ["a3-highgpu-8g", "1"]
    total = next(line for line in lines if line.startswith("Total"))
    assert total.split() == ["Total", f"${got.per_hour:.4f}"]
    assert "list prices of us-central1, 2026-11; not a quote" in lines
    widths = {len(line) for line in lines[: lines.index(total) + 1]}
    assert len(widths) == 1  # aligned: every row as wide as the rule under them
    assert "spot list prices of us-central1, 2026-11; not a quote" in estimate("e2-standard-2", 1, spot=True).table()
    assert isinstance(got, Estimate)


@pytest.mark.parametrize(
    ("gpu_type", "count", "machine_type"),
    [
        ("nvidia-tesla-t4", 1, "n1-standard-4"),
        ("nvidia-tesla-t4", 4, "n1-standard-4"),
        ("nvidia-l4", 1, "g2-standard-4"),
        ("nvidia-l4", 2, "g2-standard-24"),
        ("nvidia-l4", 4, "g2-standard-48"),
        ("nvidia-l4", 8, "g2-standard-96"),
        ("nvidia-tesla-a100", 1, "a2-highgpu-1g"),
        ("nvidia-tesla-a100", 8, "a2-highgpu-8g"),
        ("nvidia-h100-80gb", 2, "a3-highgpu-2g"),
        ("nvidia-h100-80gb", 4, "a3-highgpu-4g"),
    ],
)
def test_gpu_machine_type(gpu_type, count, machine_type):
    assert gpu_machine_type(gpu_type, count) == machine_type
    assert machine_type in table_file()["machines"]  # every machine it names has a price


@pytest.mark.parametrize(
    ("gpu_type", "count", "expected"),
    [
        ("nvidia-tesla-t4", 3, "1, 2 or 4"),
        ("nvidia-tesla-t4", 8, "1, 2 or 4"),
        ("nvidia-l4", 3, "1, 2, 4 or 8"),
        ("nvidia-l4", 16, "1, 2, 4 or 8"),
        ("nvidia-tesla-a100", 0, "1, 2, 4 or 8"),
        ("nvidia-h100-80gb", 6, "1, 2, 4 or 8"),
    ],
)
def test_gpu_counts_that_are_not_offered(gpu_type, count, expected):
    with pytest.raises(SpecError) as caught:
        gpu_machine_type(gpu_type, count)
    assert caught.value.path == "cluster.gpus_per_node"
    assert caught.value.got == count and caught.value.expected == expected
    assert str(caught.value).startswith("cluster.gpus_per_node: ")


@pytest.mark.parametrize("gpu_type", ["nvidia-tesla-k80", "nvidia-tesla-p100", "nvidia-tesla-v100"])
def test_retired_and_unknown_gpu_types(gpu_type):
    with pytest.raises(SpecError) as caught:
        gpu_machine_type(gpu_type, 1)
    assert caught.value.path == "cluster.gpu_type" and caught.value.got == gpu_type
    assert "nvidia-l4" in caught.value.expected
    if gpu_type != "nvidia-tesla-v100":
        assert "retired" in caught.value.message
