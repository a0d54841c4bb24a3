/* Preloaded by scripts/sanitize.sh into every process it runs (LD_PRELOAD): dlclose does
 * nothing, so the shared libraries a process opens stay mapped until it exits.
 *
 * Open MPI loads its components (MCA plugins) with dlopen and closes them in MPI_Finalize,
 * before LeakSanitizer looks at the heap at exit. The blocks those components allocated
 * and never freed would then be reported from "<unknown module>", where no suppression
 * can name them; kept loaded, their stacks name the component's library, which
 * tests/sanitizers/lsan.supp suppresses. Debian's Open MPI 4.1.4 has no parameter that
 * keeps components loaded. */
int dlclose(void *handle) {
  (void)handle;
  return 0;
}
