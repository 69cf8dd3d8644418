"""`cmake --install` puts the package under the prefix's site-packages and says where: the
package's install step (build/python/cmake_install.cmake, what `cmake --install build --prefix P`
runs for it) into a fresh prefix, then imported from there alone, in a fresh interpreter."""
import os
import re
import subprocess
import sys
import sysconfig
import tempfile

from _setup import setup

trainer, source = setup()
build = os.path.dirname(os.path.abspath(trainer))
with tempfile.TemporaryDirectory() as prefix:
    p = subprocess.run(["cmake", f"-DCMAKE_INSTALL_PREFIX={prefix}", "-P",
                        os.path.join(build, "python", "cmake_install.cmake")],
                       capture_output=True, text=True, check=True)
    site = sysconfig.get_path("platlib", "posix_prefix", {"platbase": prefix, "base": prefix})
    said = re.search(r"Python package laconic: (\S+) \(PYTHONPATH=(\S+)\)", p.stdout)
    assert said and said.groups() == (os.path.join(site, "laconic"), site), p.stdout
    env = dict(os.environ, PYTHONPATH=site)
    q = subprocess.run([sys.executable, "-c", "import laconic, sys; print(laconic.__file__); "
                        "print(laconic._laconic.__file__); print('torch' in sys.modules)"],
                       capture_output=True, text=True, env=env, cwd=prefix, check=True)
    files = q.stdout.split()
    assert files[0] == os.path.join(site, "laconic", "__init__.py"), files
    assert os.path.dirname(files[1]) == os.path.join(site, "laconic") and files[2] == "False", files
print(f"install: the package installs under PREFIX/{os.path.relpath(site, prefix)} and imports from there")
