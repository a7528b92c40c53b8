"""The native kernel's ARM64 levels (decoder/kernels/isa.py: scalar, neon, i8mm), bit for bit against the x86-64
scalar build, under emulation: decoder/kernels/kernel_check.cpp (the kernels' entry points fed deterministic
inputs, every output written) is built natively for the x86-64 levels this CPU runs and with Debian's aarch64
cross compiler for every ARM64 level (static), run under ``qemu-aarch64``, and the files compared byte for byte.
The ARM64 levels are also built with clang (LLVM's code generation, as Apple's clang on macOS) where it is
installed. The tools come from scripts/get-arm-tools.sh; without them these tests skip and say so. Also the level
selection on ARM64 machines, from fabricated ``/proc/cpuinfo`` and ``sysctl`` text."""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

import pytest

from lookahead_lsp.decoder.kernels.isa import (
    ARM_LEVELS,
    ISA_ENV,
    LEVELS,
    architecture,
    bf16_allowed,
    chosen_level,
    cpuinfo_flags,
    darwin_flags,
    machine_levels,
    runnable_levels,
)
from lookahead_lsp.decoder.kernels.woq_native import SOURCES, compile_flags, compiler, kernel_sources, library_flags

CROSS = "aarch64-linux-gnu-g++"
CROSS_LINKER = "aarch64-linux-gnu-ld"
CLANG = "clang++"
OBJDUMP = "aarch64-linux-gnu-objdump"
QEMU = "qemu-aarch64"
DRIVER = "kernel_check.cpp"
ISA_NAMES = {"scalar": "scalar", "neon": "neon-dotprod", "i8mm": "neon-i8mm"}
Outputs = dict[str, tuple[str, dict[str, bytes]]]
"""By level: the level a driver build names, and its records by name."""

# /proc/cpuinfo of an ARM64 Linux machine (a Graviton 3: dot products and i8mm)
GRAVITON3 = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop \
sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng
CPU implementer\t: 0x41

processor\t: 1
Features\t: fp asimd
"""
# a Cortex-A72 (Raspberry Pi 4): no dot products
CORTEX_A72 = "processor\t: 0\nFeatures\t: fp asimd evtstrm crc32 cpuid\nCPU part\t: 0xd08\n"
# `sysctl hw.optional.arm.FEAT_DotProd hw.optional.arm.FEAT_I8MM` on an Apple M1 (no i8mm) and an M2
APPLE_M1 = "hw.optional.arm.FEAT_DotProd: 1\nhw.optional.arm.FEAT_I8MM: 0\n"
APPLE_M2 = "hw.optional.arm.FEAT_DotProd: 1\nhw.optional.arm.FEAT_I8MM: 1\n"


def test_arm_levels_come_from_linux_cpuinfo_features() -> None:
    assert {"asimddp", "i8mm", "bf16"} <= cpuinfo_flags(GRAVITON3)
    assert runnable_levels(cpuinfo_flags(GRAVITON3), "aarch64") == ["scalar", "neon", "i8mm"]
    assert runnable_levels(cpuinfo_flags(CORTEX_A72), "aarch64") == ["scalar"]
    assert runnable_levels(cpuinfo_flags("Features\t: fp asimd asimddp\n"), "aarch64") == ["scalar", "neon"]
    assert cpuinfo_flags("model name\t: something\n") == frozenset()


def test_arm_levels_come_from_macos_sysctl() -> None:
    assert darwin_flags(APPLE_M1) == {"asimddp"}
    assert darwin_flags(APPLE_M2) == {"asimddp", "i8mm"}
    assert darwin_flags("") == frozenset()  # an Intel Mac or an old macOS: nothing known
    assert runnable_levels(darwin_flags(APPLE_M1), "arm64") == ["scalar", "neon"]
    assert runnable_levels(darwin_flags(APPLE_M2), "arm64") == ["scalar", "neon", "i8mm"]


def test_machine_names_map_to_their_levels() -> None:
    assert architecture("x86_64") == architecture("AMD64") == "x86_64"
    assert architecture("aarch64") == architecture("arm64") == architecture("ARM64") == "aarch64"
    assert architecture("riscv64") == "other" and machine_levels("riscv64") == {}
    assert machine_levels("aarch64") is ARM_LEVELS and machine_levels("x86_64") is LEVELS
    assert runnable_levels(frozenset({"avx2", "fma", "f16c", "asimddp"}), "x86_64") == ["scalar", "avx2"]


def test_the_environment_forces_an_arm_level_the_cpu_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    graviton, a72 = cpuinfo_flags(GRAVITON3), cpuinfo_flags(CORTEX_A72)
    monkeypatch.delenv(ISA_ENV, raising=False)
    assert chosen_level(graviton, "aarch64") == "i8mm" and chosen_level(a72, "aarch64") == "scalar"
    for level in ("neon", "i8mm", "scalar"):
        monkeypatch.setenv(ISA_ENV, level)
        assert chosen_level(graviton, "aarch64") == level
    monkeypatch.setenv(ISA_ENV, "i8mm")
    assert chosen_level(darwin_flags(APPLE_M1), "arm64") == "neon"  # a level the CPU lacks: its best instead
    monkeypatch.setenv(ISA_ENV, "avx2")
    assert chosen_level(graviton, "aarch64") == "i8mm"  # another architecture's level: ignored
    monkeypatch.setenv(ISA_ENV, "neon")
    assert chosen_level(frozenset({"avx2", "fma", "f16c"}), "x86_64") == "avx2"


def test_bfloat16_stays_for_bfloat16_cpus_levels_or_another_architecture_s(monkeypatch: pytest.MonkeyPatch) -> None:
    levels = machine_levels()
    for level in [*LEVELS, *ARM_LEVELS]:
        monkeypatch.setenv(ISA_ENV, level)
        without = level in levels and level not in ("avx512", "avx512-amx", "i8mm")  # levels of no bfloat16 CPU
        assert bf16_allowed() is not without, level
    monkeypatch.delenv(ISA_ENV)
    assert bf16_allowed()


def test_macos_builds_a_dylib_on_torch_s_openmp_runtime(tmp_path: Path) -> None:
    assert library_flags("darwin", tmp_path) == ("-dynamiclib",)  # no libomp.dylib: one thread, still built
    (tmp_path / "libomp.dylib").write_bytes(b"")
    flags = library_flags("darwin", tmp_path)
    assert flags[:3] == ("-dynamiclib", "-Xpreprocessor", "-fopenmp") and f"-L{tmp_path}" in flags
    assert "-lomp" in flags and "-fPIC" not in flags
    assert "-fopenmp" in library_flags("linux") and "-shared" in library_flags("linux")
    assert compile_flags("i8mm", "arm64")[-1] == "-march=armv8.2-a+dotprod+i8mm"
    assert "-ffp-contract=off" in compile_flags("scalar", "aarch64") and "-ffp-contract=off" in compile_flags(
        "avx2", "x86_64"
    )


def arm_tools_missing() -> str | None:
    """Why the ARM64 builds cannot be made and run here (None: they can)."""
    missing = [tool for tool in (CROSS, OBJDUMP, QEMU) if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (scripts/get-arm-tools.sh installs them: needs root and apt-get)"
    return None


def build_driver(cxx: list[str], flags: tuple[str, ...], target: Path) -> Path:
    """The test driver and the kernel's sources compiled into one program ``target`` by ``cxx`` (the compiler
    and its own options)."""
    scratch = target.parent / f"{target.name}-src"
    scratch.mkdir()
    driver = resources.files("lookahead_lsp.decoder.kernels").joinpath(DRIVER).read_bytes()
    for name, text in {**kernel_sources(), DRIVER: driver}.items():
        (scratch / name).write_bytes(text)
    sources = [str(scratch / name) for name in (DRIVER, *SOURCES)]
    command = [*cxx, *flags, "-o", str(target), *sources]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return target


def build_levels(cxx: list[str], machine: str, levels: list[str], root: Path) -> dict[str, Path]:
    """The driver built by ``cxx`` for each of ``machine``'s ``levels`` under ``root`` (side by side), by level."""
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        built = {level: pool.submit(build_driver, cxx, compile_flags(level, machine), root / f"check-{level}")
                 for level in levels}  # fmt: skip
        return {level: future.result() for level, future in built.items()}


def run_driver(command: list[str], target: Path) -> tuple[str, dict[str, bytes]]:
    """Run a built driver (``command`` then the output path): the level it names, and its records by name."""
    done = subprocess.run([*command, str(target)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stderr[-2000:]}"
    return done.stdout.strip(), records(target.read_bytes())


def records(data: bytes) -> dict[str, bytes]:
    """The driver's output file as {name: the values' bytes}."""
    found, at = {}, 0
    while at < len(data):
        end = data.index(b"\n", at)
        name, count, size = data[at:end].decode().rsplit(" ", 2)
        at = end + 1 + int(count) * int(size)
        found[name] = data[end + 1 : at]
    return found


def differences(got: dict[str, bytes], want: dict[str, bytes]) -> list[str]:
    """The records that differ (or are missing on either side)."""
    return [name for name in sorted(set(got) | set(want)) if got.get(name) != want.get(name)]


@pytest.fixture(scope="module")
def x86_outputs(tmp_path_factory: pytest.TempPathFactory) -> Outputs:
    """The driver's outputs at every x86-64 level this CPU runs, by level."""
    cxx = compiler()
    if architecture() != "x86_64" or cxx is None:
        pytest.skip("the reference is the x86-64 scalar build: needs an x86-64 machine with a C++ compiler")
    root = tmp_path_factory.mktemp("x86-driver")
    programs = build_levels([cxx, "-fopenmp"], "x86_64", runnable_levels(), root)
    return {level: run_driver([str(program)], root / f"{level}.out") for level, program in programs.items()}


@pytest.fixture(scope="module")
def arm_programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The driver built for every ARM64 level (static, for qemu-aarch64), by level."""
    reason = arm_tools_missing()
    if reason is not None:
        print(f"SKIP ARM64 kernels under emulation: {reason}")
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("arm-driver")
    return build_levels([CROSS, "-fopenmp", "-static"], "aarch64", list(ARM_LEVELS), root)


@pytest.fixture(scope="module")
def clang_arm_programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The driver built for every ARM64 level by clang (GCC's aarch64 headers, libgomp and linker), by level."""
    reason = arm_tools_missing() or (None if shutil.which(CLANG) else f"{CLANG} not installed (Debian's clang)")
    if reason is not None:
        print(f"SKIP ARM64 kernels built by clang: {reason}")
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("clang-arm-driver")
    linker = f"-fuse-ld={shutil.which(CROSS_LINKER)}"
    cxx = [CLANG, "--target=aarch64-linux-gnu", "-fopenmp=libgomp", linker, "-static"]
    return build_levels(cxx, "aarch64", list(ARM_LEVELS), root)


def test_the_driver_covers_every_entry_point_and_kind_of_input(x86_outputs: Outputs) -> None:
    names = set(x86_outputs["scalar"][1])
    for layout, mode in [*((layout, mode) for layout in (4, 5, 8) for mode in range(4)), (6, 4)]:  # (6, 4): Q6_K
        assert {f"linear layout {layout} mode {mode} rows {rows}" for rows in [*range(1, 17), 72]} <= names
        assert f"dequantize bfloat16 linear layout {layout} mode {mode}" in names
    assert {"attention dim 64", "attention dim 128", "attention dim 32", "rope", "swiglu 4864", "norm 896"} <= names


def test_every_x86_level_writes_the_scalar_build_s_bytes(x86_outputs: Outputs) -> None:
    names = {level: {"avx512": "avx512-vnni"}.get(level, level) for level in LEVELS}  # the names woq_isa() reports
    _, reference = x86_outputs["scalar"]
    for level, (isa, outputs) in x86_outputs.items():
        assert isa == names[level]
        assert differences(outputs, reference) == [], level


def assert_reference_bytes(program: Path, cpu: str, level: str, x86_outputs: Outputs, tmp_path: Path) -> None:
    """``program`` (an ARM64 level's driver) under ``qemu-aarch64 -cpu cpu`` names ``level`` and writes the x86-64
    scalar build's bytes."""
    isa, outputs = run_driver([QEMU, "-cpu", cpu, str(program)], tmp_path / f"{program.name}.out")
    assert isa == ISA_NAMES[level]
    assert differences(outputs, x86_outputs["scalar"][1]) == []


@pytest.mark.parametrize("level", list(ARM_LEVELS))
@pytest.mark.parametrize("programs", ["arm_programs", "clang_arm_programs"])  # GCC's builds, clang's
def test_every_arm_level_under_qemu_writes_the_x86_scalar_build_s_bytes(
    level: str, programs: str, x86_outputs: Outputs, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    built: dict[str, Path] = request.getfixturevalue(programs)
    assert_reference_bytes(built[level], "max", level, x86_outputs, tmp_path)


def test_the_neon_level_runs_on_a_cpu_without_i8mm_and_the_i8mm_level_does_not(
    arm_programs: dict[str, Path], x86_outputs: Outputs, tmp_path: Path
) -> None:
    # a Cortex-A76 has ARMv8.2's dot products, not i8mm (as an Apple M1 or a Graviton 2)
    assert_reference_bytes(arm_programs["neon"], "cortex-a76", "neon", x86_outputs, tmp_path)
    done = subprocess.run([QEMU, "-cpu", "cortex-a76", str(arm_programs["i8mm"]), str(tmp_path / "i8mm")],
                          capture_output=True, timeout=300)  # fmt: skip
    assert done.returncode != 0  # an illegal instruction: usmmla


def test_each_arm_level_multiplies_with_its_instructions(arm_programs: dict[str, Path]) -> None:
    counts = {}
    for level, program in arm_programs.items():
        text = subprocess.run([OBJDUMP, "-d", str(program)], capture_output=True, text=True, timeout=300).stdout
        counts[level] = {op: text.count(f"\t{op}\t") for op in ("sdot", "usdot", "usmmla")}
    assert counts["scalar"] == {"sdot": 0, "usdot": 0, "usmmla": 0}
    assert counts["neon"]["sdot"] > 0 and counts["neon"]["usdot"] == counts["neon"]["usmmla"] == 0
    assert counts["i8mm"]["usmmla"] > 0 and counts["i8mm"]["usdot"] > 0  # usdot: a pass's odd last row
