"""The dynamic symbols of Amphora's shared libraries are its API and nothing
else: names in namespace amphora (and their type information), none of the
libraries they use (CLI11, yaml-cpp, the standard library's or nlohmann's
template instantiations), and no internal helper, i.e. every amphora::detail
name exported is one an installed header declares.

    test_abi.py --libs LIB... --headers DIR...
"""

import re
import subprocess
import sys

ALLOWED = ("amphora::", "typeinfo for amphora::", "typeinfo name for amphora::", "vtable for amphora::",
           "VTT for amphora::")


def exported(lib):
    out = subprocess.run(["nm", "-DC", "--defined-only", lib], check=True, capture_output=True, text=True).stdout
    names = []
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            names.append(parts[2])
    return names


def header_text(dirs):
    import os
    text = []
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                if f.endswith(".hpp"):
                    with open(os.path.join(root, f), encoding="utf-8") as h:
                        text.append(h.read())
    return "\n".join(text)


def main():
    args = sys.argv[1:]
    libs = args[args.index("--libs") + 1:args.index("--headers")]
    headers = header_text(args[args.index("--headers") + 1:])
    failures = []
    for lib in libs:
        names = exported(lib)
        if len(names) < 3:
            failures.append(f"{lib} exports {len(names)} symbols: nothing of its API")
        for name in names:
            if not name.startswith(ALLOWED):
                failures.append(f"{lib}: {name} is not in namespace amphora")
                continue
            for foreign in ("CLI::", "YAML::"):
                if foreign in name:
                    failures.append(f"{lib}: {name} exposes {foreign[:-2]}")
            m = re.search(r"amphora::detail::(\w+)", name.split("(")[0])
            if m and not re.search(r"\b" + m.group(1) + r"\b", headers):
                failures.append(f"{lib}: {name} is an internal helper no installed header declares")
        print(f"{lib}: {len(names)} symbols")
    for f in failures[:40]:
        print("FAIL:", f)
    if failures:
        print(f"{len(failures)} problems")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
