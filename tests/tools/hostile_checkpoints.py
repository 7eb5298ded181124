"""Checkpoints that would run code or touch the disk if loaded, each harmless: what they would do
is create the file PWNED. The tools must refuse each without --trust-pickle, and PWNED must not
appear (training_test.sh checks both).

usage: hostile_checkpoints.py FOLDER PWNED   writes in FOLDER:
  evil.pt     a pickle whose __reduce__ runs a shell command (torch's weights-only unpickler
              refuses it)
  evil-ts.pt  a TorchScript archive whose __setstate__ creates PWNED with torch.from_file: torch
              1.13's torch.load hands it to torch.jit.load whatever weights_only says
  evil-ts-folder.pt  the same entries under another top folder (torch reads it just the same)
  evil-tar.pt torch's legacy tar format: torch 1.13 extracts its members into a temporary folder
              before its weights-only unpickler reads them
"""
import io
import os
import pickle
import sys
import tarfile
import zipfile

import torch


class Evil:
    def __reduce__(self):
        return (os.system, (f"touch {sys.argv[2]}",))


class EvilScript(torch.nn.Module):
    """TorchScript keeps __setstate__, and torch.jit.load runs it."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path
        self.buf = torch.zeros(0)

    def forward(self, x):
        return x

    @torch.jit.export
    def __getstate__(self):
        return (self.path, self.training)

    @torch.jit.export
    def __setstate__(self, state: tuple[str, bool]):
        self.path = state[0]
        self.training = state[1]
        self.buf = torch.from_file(self.path, True, 16)  # shared: creates the file
        self.buf.fill_(7.0)


def legacy_tar(path):
    """The members torch's _legacy_load reads: storages (a count, then views), tensors (a count)
    and the pickle (an empty dict): torch 1.13 reads it weights-only, as {}."""
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, objs in (("storages", (0, [])), ("tensors", (0,)), ("pickle", ({},))):
            data = b"".join(pickle.dumps(obj, protocol=2) for obj in objs)
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def main():
    folder = sys.argv[1]
    torch.save({"model_state": Evil()}, os.path.join(folder, "evil.pt"))
    script = os.path.join(folder, "evil-ts.pt")
    torch.jit.save(torch.jit.script(EvilScript(sys.argv[2])), script)
    with zipfile.ZipFile(script) as src, \
            zipfile.ZipFile(os.path.join(folder, "evil-ts-folder.pt"), "w") as out:
        for entry in src.infolist():
            out.writestr("archive/" + entry.filename.split("/", 1)[1], src.read(entry))
    legacy_tar(os.path.join(folder, "evil-tar.pt"))


if __name__ == "__main__":
    main()
