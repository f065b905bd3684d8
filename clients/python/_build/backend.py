"""A PEP 517 build backend for this one pure-Python package, standard library
only, so that pip installs it without fetching a build tool (pyproject.toml
says why). It packs src/eq_reply into a py3-none-any wheel, or the folder
into an sdist."""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "eq_reply"


def _project():
    """The [project] table's one-line string values."""
    fields, section = {}, None
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            header = re.fullmatch(r"\[([^\]]+)\]", line)
            if header:
                section = header.group(1)
                continue
            value = re.fullmatch(r'([A-Za-z-]+)\s*=\s*"([^"\\]*)"', line)
            if section == "project" and value:
                fields[value.group(1)] = value.group(2)
    for name in ("name", "version", "description", "requires-python", "readme"):
        if name not in fields:
            raise RuntimeError(f"pyproject.toml: [project] needs {name} as a one-line string")
    return fields


def _metadata(project):
    with open(os.path.join(ROOT, project["readme"]), encoding="utf-8") as f:
        readme = f.read()
    return (f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n"
            f"Summary: {project['description']}\nRequires-Python: {project['requires-python']}\n"
            f"Description-Content-Type: text/markdown\n\n{readme}")


def _dist_name(project):
    return re.sub(r"[-_.]+", "_", project["name"]).lower()


def _package_files():
    src = os.path.join(ROOT, "src")
    for folder, dirs, files in os.walk(os.path.join(src, PACKAGE)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py") or name == "py.typed":
                path = os.path.join(folder, name)
                yield path, os.path.relpath(path, src).replace(os.sep, "/")


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = _project()
    dist = _dist_name(project)
    info = f"{dist}-{project['version']}.dist-info"
    filename = f"{dist}-{project['version']}-py3-none-any.whl"
    entries = []
    for path, arcname in _package_files():
        with open(path, "rb") as f:
            entries.append((arcname, f.read()))
    entries.append((f"{info}/METADATA", _metadata(project).encode("utf-8")))
    entries.append((f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: eq-reply _build/backend.py\n"
                                     b"Root-Is-Purelib: true\nTag: py3-none-any\n"))
    entries.append((f"{info}/top_level.txt", f"{PACKAGE}\n".encode()))
    record = "\n".join([_record_line(a, d) for a, d in entries] + [f"{info}/RECORD,,", ""])
    entries.append((f"{info}/RECORD", record.encode("utf-8")))
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as whl:
        for arcname, data in entries:
            whl.writestr(zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0)), data,
                         compress_type=zipfile.ZIP_DEFLATED)
    return filename


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = f"{_dist_name(project)}-{project['version']}"
    filename = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as tar:
        for name in ("pyproject.toml", project["readme"], "_build/backend.py"):
            tar.add(os.path.join(ROOT, name), f"{base}/{name}")
        for path, arcname in _package_files():
            tar.add(path, f"{base}/src/{arcname}")
        pkg_info = _metadata(project).encode("utf-8")
        member = tarfile.TarInfo(f"{base}/PKG-INFO")
        member.size = len(pkg_info)
        tar.addfile(member, io.BytesIO(pkg_info))
    return filename
