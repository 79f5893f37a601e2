/**
 * @file replay_main.c
 * @brief A main for the fuzz harnesses without libFuzzer (any compiler): runs LLVMFuzzerTestOneInput on
 *        every file named on the command line, and on every file of every folder named. ctest runs each
 *        harness over its checked-in corpus this way ("fuzz-NAME:corpus"), in the sanitizer pass too, so
 *        the inputs that once found a bug stay regression tests.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/** Run the harness on one file; 0 on success. */
static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: cannot open %s\n", path);
    return 1;
  }
  size_t cap = 4096, len = 0, got;
  uint8_t *buf = malloc(cap);
  while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) {
      uint8_t *nb = realloc(buf, cap *= 2);
      if (!nb) free(buf);
      buf = nb;
    }
  }
  fclose(f);
  if (!buf) return 1;
  LLVMFuzzerTestOneInput(buf, len);
  free(buf);
  return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
  int files = 0, bad = 0;
  for (int i = 1; i < argc; i++) {
    struct stat sb;
    if (stat(argv[i], &sb) != 0) {
      fprintf(stderr, "replay: %s does not exist\n", argv[i]);
      return 1;
    }
    if (!S_ISDIR(sb.st_mode)) {
      bad |= run_file(argv[i]), files++;
      continue;
    }
    DIR *d = opendir(argv[i]);
    if (!d) return 1;
    char **names = NULL;
    size_t nn = 0;
    for (struct dirent *e; (e = readdir(d));) {
      if (e->d_name[0] == '.') continue;
      char **nnames = realloc(names, sizeof(char *) * (nn + 1));
      if (!nnames) return 1;
      names = nnames;
      size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
      names[nn] = malloc(len);
      if (!names[nn]) return 1;
      snprintf(names[nn++], len, "%s/%s", argv[i], e->d_name);
    }
    closedir(d);
    qsort(names, nn, sizeof(char *), by_name);
    for (size_t k = 0; k < nn; k++) bad |= run_file(names[k]), files++, free(names[k]);
    free(names);
  }
  printf("replay: %d inputs\n", files);
  return bad || files == 0;
}
