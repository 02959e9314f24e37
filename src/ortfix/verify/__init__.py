"""Out-of-process proof that the GPU path works: the library-load check and the three levels of `ortfix verify`."""
