"""A PEP 517 build backend of the standard library only, so that
`pip install ./python` needs no network: it packs the `hetccl` folder into
a pure-Python wheel (and an sdist), with the metadata of pyproject.toml."""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "hetccl"


def _project():
    """name, version, summary, python requirement from pyproject.toml."""
    try:
        import tomllib  # Python 3.11+
        with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
            project = tomllib.load(f)["project"]
    except ImportError:  # older Pythons: the few flat keys this file uses
        project = {}
        section = None
        with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line.startswith("["):
                    section = line.strip("[]")
                elif section == "project" and "=" in line and not line.startswith("#"):
                    key, value = (part.strip() for part in line.split("=", 1))
                    if value.startswith('"'):
                        project[key] = value.strip('"')
    return project["name"], project["version"], project.get("description", ""), project.get("requires-python", "")


def _metadata():
    name, version, summary, python = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", f"Summary: {summary}"]
    if python:
        lines.append(f"Requires-Python: {python}")
    return name, version, "\n".join(lines) + "\n"


def _package_files():
    for folder, dirs, files in os.walk(os.path.join(ROOT, NAME)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py") or f == "py.typed":
                path = os.path.join(folder, f)
                yield path, os.path.relpath(path, ROOT).replace(os.sep, "/")


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name, version, metadata = _metadata()
    dist_info = f"{name}-{version}.dist-info"
    wheel_name = f"{name}-{version}-py3-none-any.whl"
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as whl:
        def add(arcname, data):
            whl.writestr(arcname, data)
            record.append(_record_line(arcname, data))

        for path, arcname in _package_files():
            with open(path, "rb") as f:
                add(arcname, f.read())
        add(f"{dist_info}/METADATA", metadata.encode())
        add(f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: hetccl_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        record.append(f"{dist_info}/RECORD,,")
        whl.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    name, version, metadata = _metadata()
    base = f"{name}-{version}"
    sdist_name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, sdist_name), "w:gz") as tar:
        def add(arcname, data):
            info = tarfile.TarInfo(f"{base}/{arcname}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))

        files = [("pyproject.toml", os.path.join(ROOT, "pyproject.toml")),
                 ("build_backend/hetccl_build.py", os.path.abspath(__file__))]
        files += [(arcname, path) for path, arcname in _package_files()]
        for arcname, path in files:
            with open(path, "rb") as f:
                add(arcname, f.read())
        add("PKG-INFO", metadata.encode())
    return sdist_name
