"""Hardware identifiers (serial numbers, asset tags, UUIDs) never reach a snapshot (tunehost/host/identifiers.py),
and scrubbing them changes no verdict: real captured machines re-recorded and written again replay the same."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import DATA, corpus
from tunehost.doctor import run_doctor
from tunehost.doctor.registry import load_checks
from tunehost.facts import HostFacts
from tunehost.host import Host, open_host
from tunehost.host.commands import CommandLog
from tunehost.host.files import AccessLog, HostFiles
from tunehost.host.identifiers import Pseudonyms, identifying_file, scrub_identifiers
from tunehost.host.redact import REDACTED
from tunehost.host.snapshot import CANONICAL_SAMPLES, write_snapshot

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.IGNORECASE)
# real machines: the lent H100's and H200's snapshots (gpu_proof), with their boards' serial numbers and UUIDs
PROOF_SNAPSHOTS = [DATA / "gpu-proof" / "h100-580.159.04" / "first" / "snapshot",
                   DATA / "gpu-proof" / "h200-580.159.04" / "fifth" / "snapshot"]


def test_dmidecode_serial_numbers_and_asset_tags_are_redacted_placeholders_kept():
    text = ("Memory Device\n\tSize: 32 GB\n\tSerial Number: 8A1B2C3D\n\tAsset Tag: 9876543210\n"
            "\tPart Number: CMK64GX5M2B6000C30\nMemory Device\n\tSize: No Module Installed\n"
            "\tSerial Number: Not Specified\n\tAsset Tag: Not Specified\n\tSerial Number: --\n")
    out = scrub_identifiers(text, Pseudonyms())
    assert "8A1B2C3D" not in out and "9876543210" not in out
    assert f"\tSerial Number: {REDACTED}\n\tAsset Tag: {REDACTED}\n" in out
    assert "\tSerial Number: Not Specified\n\tAsset Tag: Not Specified\n\tSerial Number: --\n" in out
    assert "\tPart Number: CMK64GX5M2B6000C30\n" in out  # what ram-speed reads is untouched


def test_nvidia_smi_text_and_xml_keep_their_shape_and_share_one_pseudonym_per_uuid():
    text = (DATA / "gpu-proof" / "h200-580.159.04" / "fifth" / "nvidia-smi-q.txt").read_text()
    xml = (DATA / "gpu-proof" / "h200-580.159.04" / "fifth" / "nvidia-smi-q-x.xml").read_text()
    [serial] = set(re.findall(r"Serial Number\s+:\s+(\d{6,})", text))
    uuids = set(UUID.findall(text)) | set(UUID.findall(xml))
    assert uuids
    names = Pseudonyms()
    out_text, out_xml = scrub_identifiers(text, names), scrub_identifiers(xml, names)
    for out in (out_text, out_xml):
        assert serial not in out and not any(u in out for u in uuids)
    assert "Chassis Serial Number                          : N/A" in out_text  # a blank field stays blank
    root = ET.fromstring(out_xml)  # still XML that parses
    assert root.find("gpu/serial").text == REDACTED
    gpu_uuid = root.find("gpu/uuid").text
    assert gpu_uuid.startswith("GPU-") and UUID.fullmatch(gpu_uuid[4:])
    assert f"GPU UUID                                           : {gpu_uuid}" in out_text  # the same pseudonym
    # another snapshot of the same board gets another one: two snapshots cannot be linked by it
    assert gpu_uuid not in scrub_identifiers(xml, Pseudonyms())


def test_udev_dmi_identifiers_are_redacted_and_what_ram_speed_reads_stays():
    from tunehost.parsers.udev_dmi import parse_udev_dmi_memory

    text = (DATA / "udev_dmi" / "systemd-test-HP-Z600.txt").read_text()
    out = scrub_identifiers(text + "E:ID_PRODUCT_UUID=4c4c4544-0042-3510-8052-b4c04f4d3732\n", Pseudonyms())
    assert "BC8A0E80" not in out and "4c4c4544-0042" not in out
    assert "MEMORY_DEVICE_0_SERIAL_NUMBER=<redacted>" in out
    assert "MEMORY_DEVICE_6_SERIAL_NUMBER=Not Specified" in out
    assert parse_udev_dmi_memory(out) == parse_udev_dmi_memory(text)


def test_files_named_for_an_identifier_are_never_kept_when_only_listed():
    for path in ("/sys/class/dmi/id/product_serial", "/sys/class/dmi/id/product_uuid", "/sys/class/dmi/id/board_serial",
                 "/sys/class/dmi/id/chassis_asset_tag", "/sys/bus/pci/devices/0000:01:00.0/vpd"):
        assert identifying_file(path), path
    for path in ("/sys/class/dmi/id/product_name", "/sys/class/dmi/id/chassis_type", "/proc/cmdline",
                 "/sys/bus/pci/devices/0000:01:00.0/current_link_speed"):
        assert not identifying_file(path), path


class _Rerecorded:
    """A captured machine's commands answered again, recorded as a live run records them."""

    def __init__(self, source: Host):
        self.source = source.commands
        self.log = CommandLog()

    def run(self, argv, timeout=None):
        from tunehost.host.commands import command_file_name

        result = self.source.run(argv)
        if result is not None:
            self.log.results[command_file_name(argv)] = result
        return result

    def which(self, name):
        found = self.source.which(name)
        self.log.which[name] = found
        return found


def _rerecording_host(snapshot: Path, extra_root: Path | None = None) -> Host:
    """A recording host over a captured machine: its files (fs/), commands and samples, as `tunehost snapshot`
    would record them there."""
    source = open_host(snapshot)
    host = Host(HostFiles(extra_root or snapshot / "fs", log=AccessLog()), _Rerecorded(source))
    for name in (*CANONICAL_SAMPLES, *(p.stem for p in (snapshot / "samples").glob("*.json") if p.stem != "which")):
        host.put_sample(name, source.sample(name))
    return host


@pytest.mark.parametrize("snapshot", PROOF_SNAPSHOTS, ids=lambda p: p.parent.parent.name)
def test_a_real_machine_written_again_holds_no_identifier_and_replays_the_same_verdicts(snapshot, tmp_path):
    originals = {s for p in snapshot.rglob("*") if p.is_file()
                 for s in re.findall(r"Serial Number\s*:\s*(\d{6,})", p.read_text(errors="replace"))}
    originals |= {u for p in snapshot.rglob("*") if p.is_file() for u in UUID.findall(p.read_text(errors="replace"))}
    assert originals, "the captured machine had identifiers to scrub"
    checks = load_checks().checks
    host = _rerecording_host(snapshot)
    recorded = run_doctor(HostFacts(host), checks)
    write_snapshot(host, tmp_path / "snap")
    for path in (tmp_path / "snap").rglob("*"):
        if path.is_file():
            data = path.read_text(errors="replace")
            leaked = [s for s in originals if s in data]
            assert not leaked, (path, leaked)
    nvml = json.loads((tmp_path / "snap" / "samples" / "nvml.json").read_text())
    xml = ET.fromstring((tmp_path / "snap" / "cmd" / "nvidia-smi_-q_-x").read_text())
    assert [g["uuid"] for g in nvml["gpus"]] == [g.find("uuid").text for g in xml.findall("gpu")]
    replayed = run_doctor(HostFacts(open_host(tmp_path / "snap")), checks)
    assert [f.to_json() for f in replayed.findings] == [f.to_json() for f in recorded.findings]


def test_a_listed_identifier_file_is_left_out_and_a_read_one_is_scrubbed(tmp_path):
    root = tmp_path / "root"
    dmi = root / "sys/class/dmi/id"
    dmi.mkdir(parents=True)
    (dmi / "product_name").write_text("Precision 7960 Tower\n")
    (dmi / "product_serial").write_text("7XK2Q93\n")
    (dmi / "product_uuid").write_text("4c4c4544-0058-4b10-8032-b7c04f513933\n")
    (root / "proc").mkdir()
    (root / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz root=UUID=0f3c2b8e-1d4a-4c7e-9b21-5a6f7e8d9c0b ro quiet\n")
    host = Host(HostFiles(root, log=AccessLog()), _Rerecorded(open_host(DATA / "snapshots" / "ci-vm")))
    for name in CANONICAL_SAMPLES:
        host.put_sample(name, [])
    host.files.listdir("/sys/class/dmi/id")
    host.files.read_bytes("/proc/cmdline")
    write_snapshot(host, tmp_path / "snap")
    fs = tmp_path / "snap" / "fs"
    assert (fs / "sys/class/dmi/id/product_name").read_text() == "Precision 7960 Tower\n"
    assert not (fs / "sys/class/dmi/id/product_serial").exists() and not (fs / "sys/class/dmi/id/product_uuid").exists()
    cmdline = (fs / "proc/cmdline").read_text()
    assert "0f3c2b8e" not in cmdline and re.fullmatch(r"BOOT_IMAGE=/vmlinuz root=UUID=\S{36} ro quiet\n", cmdline)


def test_the_corpus_nvidia_smi_dumps_lose_every_identifier():
    for name in ("nvidia-smi/a100-sxm4-80gb-mig-enabled-x16-gen4-p0-q-x.txt",
                 "nvidia-smi/rtx4090-gen3-host-devicemax4-hostmax3-idle-p8-q.txt"):
        text = corpus(name)
        out = scrub_identifiers(text, Pseudonyms())
        assert not set(UUID.findall(text)) & set(UUID.findall(out)), name
        assert not re.search(r"<serial>\d{6,}</serial>|Serial Number\s+:\s+\d{6,}", out), name


def test_a_raspberry_pis_cpuinfo_serial_is_redacted():
    # the Pi 4's /proc/cpuinfo tail as llama.cpp issue #58 shows it
    text = ("Hardware\t: BCM2835\nRevision\t: c03111\nSerial\t\t: 10000000d62b612e\n"
            "Model\t\t: Raspberry Pi 4 Model B Rev 1.1\n")
    out = scrub_identifiers(text, Pseudonyms())
    assert "d62b612e" not in out and f"Serial\t\t: {REDACTED}\n" in out
    assert "Revision\t: c03111\n" in out and "Model\t\t: Raspberry Pi 4 Model B Rev 1.1\n" in out
