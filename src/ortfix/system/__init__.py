"""The machine as ortfix sees it: ELF files, ld.so's cache, the loader simulation, the driver, every copy of the
libraries, the hook files, subprocesses and ortfix's own cache folder."""
