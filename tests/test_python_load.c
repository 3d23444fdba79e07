/* Python kernels (kernels/python), loading: every load failure is one sentence (those past the
 * interpreter skip, with the reason, where no python3 imports torch), and the default
 * interpreter's choice, which runs anywhere python3 does, with tests/python/stub_torch standing
 * in for torch. */
#include "python_fixtures.h"

static void test_load_errors(void) {
    char spec[1024];
    expect_make_error("python:nofunction", KVF_EINVAL, "python:MODULE:FUNCTION");
    expect_make_error("python::decode", KVF_EINVAL, "python:MODULE:FUNCTION");
    setenv("KVF_PYTHON", "/nonexistent/python3", 1);
    spec_for(spec, sizeof spec, "examples/python/torch_decode.py", "decode");
    expect_make_error(spec, KVF_ENOTFOUND, "KVF_PYTHON names /nonexistent/python3");
    unsetenv("KVF_PYTHON");
    NEED_TORCH();
    expect_make_error("python:kvfuzz_no_such_module:decode", KVF_ENOTFOUND,
                      "no Python module kvfuzz_no_such_module");
    spec_for(spec, sizeof spec, "examples/python/torch_decode.py", "no_such_function");
    expect_make_error(spec, KVF_ENOTFOUND, "has no function no_such_function");
    spec_for(spec, sizeof spec, "tests/python/bad_kernels.py", "two_arguments");
    expect_make_error(spec, KVF_EINVAL, "cannot take kvfuzz's nine arguments");
    spec_for(spec, sizeof spec, "tests/python/bad_kernels.py", "not_a_function");
    expect_make_error(spec, KVF_EINVAL, "is not a function");
    spec_for(spec, sizeof spec, "tests/python/no_such_file.py", "decode");
    expect_make_error(spec, KVF_ENOTFOUND, "no Python file");

    /* An interpreter without torch: the same python3 with its site packages switched off. */
    char dir[] = "/tmp/kvfuzz-test-python-XXXXXX", wrapper[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(wrapper, sizeof wrapper, "%s/python3", dir);
    FILE *f = fopen(wrapper, "w");
    const char *py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
    fprintf(f, "#!/bin/sh\nexec %s -S \"$@\"\n", py);
    fclose(f);
    chmod(wrapper, 0755);
    setenv("KVF_PYTHON", wrapper, 1);
    spec_for(spec, sizeof spec, "examples/python/torch_decode.py", "decode");
    expect_make_error(spec, KVF_ENOTFOUND, "cannot import torch");
    unsetenv("KVF_PYTHON");
    unlink(wrapper);
    rmdir(dir);
}

static void write_script(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
    chmod(path, 0755);
}

/* Without KVF_PYTHON the first of the PATH's python3 and /usr/bin/python3 that imports torch
 * runs the kernels; with none that does, the PATH's all the same; KVF_PYTHON always wins. The
 * PATH's python3 here is a wrapper: one that finds the stand-in torch, one that finds none. */
static void test_interpreter_choice(void) {
    char py[1024];
    NEED_PYTHON(py);
    saved_env env;
    env_save(&env);
    unsetenv("KVF_PYTHON");
    unsetenv("PYTHONPATH");
    setenv("PYTHONDONTWRITEBYTECODE", "1", 1);
    char with[] = "/tmp/kvfuzz-test-with-torch-XXXXXX",
         without[] = "/tmp/kvfuzz-test-no-torch-XXXXXX";
    CHECK(mkdtemp(with) && mkdtemp(without));
    char text[4096], path[4200], want[1100], spec[1024];
    snprintf(text, sizeof text,
             "#!/bin/sh\nPYTHONPATH='%s/tests/python/stub_torch' exec '%s' \"$@\"\n", source_dir(),
             py);
    snprintf(want, sizeof want, "%s/python3", with);
    write_script(want, text);
    snprintf(text, sizeof text, "#!/bin/sh\nexec '%s' -S -E \"$@\"\n", py);
    snprintf(path, sizeof path, "%s/python3", without);
    write_script(path, text);

    char *chosen = NULL;
    int torch = -2;
    kvf_error err = {0};
    snprintf(text, sizeof text, "%s:%s", with, env.value[0] ? env.value[0] : "");
    setenv("PATH", text, 1);
    CHECK_OK(kvf__python_choose(&chosen, &torch, &err), &err);
    CHECK(chosen && strcmp(chosen, want) == 0);
    CHECK_INT_EQ(torch, 1);
    free(chosen);
    /* The kernel loads under it: the stand-in's version is in its description. */
    spec_for(spec, sizeof spec, "tests/python/declared_kernels.py", "precise");
    kvf_kernel *k = make(spec);
    if (k) CHECK_STR_CONTAINS(k->description, "with torch 0+kvfuzz.stub");
    kvf__python_kernel_free(k);

    /* No torch on the PATH's: /usr/bin/python3 where it has torch, else the PATH's anyway. */
    snprintf(text, sizeof text, "%s:%s", without, env.value[0] ? env.value[0] : "");
    setenv("PATH", text, 1);
    int usr_torch = access("/usr/bin/python3", X_OK) == 0 &&
                    system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") == 0;
    CHECK_OK(kvf__python_choose(&chosen, &torch, &err), &err);
    CHECK(chosen && strcmp(chosen, usr_torch ? "/usr/bin/python3" : path) == 0);
    CHECK_INT_EQ(torch, usr_torch);
    free(chosen);
    if (!usr_torch) {
        spec_for(spec, sizeof spec, "examples/python/torch_decode.py", "decode");
        expect_make_error(spec, KVF_ENOTFOUND, "cannot import torch");
        expect_make_error(spec, KVF_ENOTFOUND, "no python3 kvfuzz tried");
    }

    /* KVF_PYTHON is taken as it is, unprobed. */
    setenv("KVF_PYTHON", path, 1);
    CHECK_OK(kvf__python_choose(&chosen, &torch, &err), &err);
    CHECK(chosen && strcmp(chosen, path) == 0);
    CHECK_INT_EQ(torch, -1);
    free(chosen);
    setenv("KVF_PYTHON", "/nonexistent/python3", 1);
    CHECK_INT_EQ(kvf__python_choose(&chosen, &torch, &err), KVF_ENOTFOUND);
    CHECK_STR_CONTAINS(err.msg, "KVF_PYTHON names /nonexistent/python3");

    env_restore(&env);
    unlink(want);
    unlink(path);
    rmdir(with);
    rmdir(without);
}

static const check_test tests[] = {
    {"load_errors", test_load_errors},
    {"interpreter_choice", test_interpreter_choice},
    {NULL, NULL},
};

CHECK_MAIN(tests)
