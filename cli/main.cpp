// The `amphora` command line: inspect and move artifacts without writing code.
// This file parses the command line (with CLI11) and turns every failure into
// one line on standard error and a documented exit status; commands.cpp does
// the work.

#include "commands.hpp"
#include "output.hpp"

#include <amphora/run_main.hpp>
#include <amphora/tensor.hpp>
#include <amphora/error.hpp>
#include <amphora/version.hpp>

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <charconv>
#include <string>
#include <vector>

namespace {

using amphora::cli::Args;
using amphora::cli::one_line;

// The documented exit statuses.
constexpr int kOk = 0, kFailure = 1, kUsage = 2, kNotFound = 3, kCorrupt = 4;

constexpr const char* kStoreHelp =
    "the store: a directory, or a URI such as file:///srv/store\n(default: $AMPHORA_STORE, else ./.amphora)";
constexpr const char* kPluginHelp =
    "load the plugin library PATH (repeatable), after those of $AMPHORA_PLUGIN_PATH\n(directories separated by ':')";
constexpr const char* kRefHelp = "NAME (latest version), NAME@N, sha256:HEX or a unique hex prefix of 8+ digits";

// A whole-number option of at least `least`, refused in the user's terms
// ("-3 is not a number of versions: give a whole number, 1 or more").
CLI::Validator whole_number(std::int64_t least, std::string unit) {
  return CLI::Validator(
      [least, unit](std::string& text) -> std::string {
        std::int64_t value = 0;
        auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error == std::errc() && end == text.data() + text.size() && value >= least) return {};
        return "'" + one_line(text) + "' is not a number of " + unit + ": give a whole number, " +
               std::to_string(least) + " or more";
      },
      "");
}

// A duration option: seconds, or a whole number with s, m, h or d.
CLI::Validator duration() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        try {
          amphora::cli::parse_duration(text);
          return {};
        } catch (const amphora::InvalidArgument& e) {
          return e.what();
        }
      },
      "");
}

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Command {
  CLI::App* app;
  int (*run)(const Args&);
  CLI::Option* store;  // the command's own --store (the global one may come before the command instead)
};

// The whole command line: a global --store and one subcommand per command.
// Every option takes one value at most: given twice, it is refused rather
// than silently taking the last.
class Parser {
 public:
  Parser() : app_("Amphora: content-addressed, versioned artifacts in a store directory.", "amphora") {
    app_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::Throw);
    auto formatter = app_.get_formatter();
    formatter->column_width(28);
    formatter->label("SUBCOMMAND", "COMMAND");
    formatter->label("Positionals", "Arguments");
    store_ = app_.add_option("--store", args_.store, kStoreHelp)->type_name("DIR");
    version_ = app_.add_flag("--version", show_version_, "print the version and exit");
    app_.add_flag("--no-remote", args_.no_remote,
                  "stay local: a ref the store lacks is not read from, or pulled from, its remote");
    app_.add_option("--plugin", args_.plugins, kPluginHelp)
        ->type_name("PATH")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    app_.footer(
        "REF is NAME (latest version), NAME@N, sha256:HEX or a unique hex prefix of 8+ digits.\n"
        "Exit status: 0 success, 1 failure, 2 usage error, 3 not found, 4 damaged data.\n"
        "Run `amphora COMMAND --help` for a command's arguments and examples.\n\n"
        "Examples:\n"
        "  amphora --store ./store init\n"
        "  amphora --store ./store import emb.npy --name emb\n"
        "  amphora --store ./store ls");

    add("init", "Create the store directory, if it is not a store yet.", amphora::cli::cmd_init,
        "Examples:\n"
        "  amphora --store ./store init\n"
        "  AMPHORA_STORE=/data/store amphora init");

    auto* ls = add("ls", "List names with their latest versions, or every version of NAME.", amphora::cli::cmd_ls,
                   "Unreadable name records are skipped with a warning on standard error.\n"
                   "SIZE is what each version's whole tree holds, children counted once; a '>'\n"
                   "before it means a child is missing or unreadable, or counting stopped.\n"
                   "--json prints an array of {name, version, digest, materializer, payload_bytes,\n"
                   "tree_bytes, tree_artifacts, tree_complete, created_at}, plus \"versions\" (how\n"
                   "many) when listing every name, and \"migrated_from\" (a digest) for a version\n"
                   "`amphora migrate` wrote.\n\n"
                   "Examples:\n"
                   "  amphora ls\n"
                   "  amphora ls emb --json");
    ls->add_option("NAME", args_.ref, "list every version of this name")->type_name("");
    ls->add_flag("--json", args_.json, "print JSON (stable fields, ASCII)");

    auto* show = add("show", "Show an artifact's digest, names, files, children and metadata.",
                     amphora::cli::cmd_show,
                     "--json prints {digest, materializer, registered, names, payload_bytes, files,\n"
                     "children: [{role, digest, materializer}], meta}.\n\n"
                     "Examples:\n"
                     "  amphora show emb\n"
                     "  amphora show emb@2 --json\n"
                     "  amphora show 1f3a9c07");
    show->add_option("REF", args_.ref, kRefHelp)->required()->type_name("");
    show->add_flag("--json", args_.json, "print JSON (stable fields, ASCII)");

    auto* import = add("import", "Store a file (.npy, .csv, .npz, .jsonl, .json, .txt) as the next version of NAME.",
                       amphora::cli::cmd_import,
                       "The file's extension picks the materializer: .npy a tensor, .csv a table (header\n"
                       "row; column types inferred; empty fields are nulls), .npz (written by\n"
                       "scipy.sparse.save_npz) a sparse matrix, .jsonl JSON lines (one record per line)\n"
                       "a record collection, .json a JSON document, .txt a string.\n"
                       "Progress is shown on a terminal. After --, every argument is a file name, even\n"
                       "one starting with -.\n\n"
                       "Examples:\n"
                       "  amphora import emb.npy --name emb\n"
                       "  amphora import counts.npy --name counts --compress lz4\n"
                       "  amphora import weights.npy --name weights --compress zstd --level 3\n"
                       "  amphora import sales.csv --name sales\n"
                       "  amphora import graph.npz --name graph\n"
                       "  amphora import ids.npy --name ids --encode delta,squeeze\n"
                       "  amphora import --name odd -- -odd.npy");
    import->add_option("FILE", args_.file, "the file to import")->required()->type_name("");
    import->add_option("--name", args_.name, "the name to record it under, as its next version")
        ->required()
        ->type_name("NAME");
    auto* compress = import->add_option(
        "--compress", args_.compress,
        "tensors' compression, in chunks (LZ4 1 MiB, zstd 256 KiB): none, lz4 (fastest), zstd (smallest), or\n"
        "auto (default: LZ4 only where it saves over 10%)");
    compress->check(CLI::IsMember({"none", "lz4", "zstd", "auto"}))->type_name("MODE");
    import->add_option("--level", args_.level, "zstd's level, 1 (default: fastest) to 19 (smallest); needs --compress zstd")
        ->check(CLI::Range(amphora::kMinZstdLevel, amphora::kMaxZstdLevel))
        ->needs(compress)
        ->type_name("N");
    import->add_option("--encode", args_.encode,
                       "tensors' lossless transforms before compression, comma-separated: decimal (float64\n"
                       "short decimals as scaled integers), delta (integers that mostly increase), squeeze (integers\n"
                       "into the narrowest width), shuffle (byte planes)")
        ->delimiter(',')
        ->check(CLI::IsMember({"decimal", "delta", "squeeze", "shuffle"}))
        ->type_name("LIST");

    auto* exp = add("export", "Verify an artifact, then write it to a file (.npy, .csv, .npz, .jsonl, .json, .txt) or directory.",
                    amphora::cli::cmd_export,
                    "The file is written atomically (a temporary file renamed into place). An\n"
                    "existing regular file is replaced; a symbolic link only with --force; a FIFO,\n"
                    "device, socket or directory never: each is refused (exit 2). A composite (an\n"
                    "artifact with children), or a value with no file format of its own, is written\n"
                    "as a new directory FILE, where nothing exists yet: its manifest.json and\n"
                    "payload files, and each child at its role, in the child's own format\n"
                    "(weights.npy, config.json) or as a directory likewise.\n\n"
                    "Examples:\n"
                    "  amphora export emb emb.npy\n"
                    "  amphora export emb@1 old.npy --force\n"
                    "  amphora export sales sales.csv\n"
                    "  amphora export graph graph.npz\n"
                    "  amphora export model model-dir");
    exp->add_option("REF", args_.ref, kRefHelp)->required()->type_name("");
    exp->add_option("FILE", args_.file, "the file to write")->required()->type_name("");
    exp->add_flag("--force", args_.force, "replace FILE even if it is a symbolic link (the link, not its target)");

    auto* verify = add("verify", "Re-hash payloads and check them against their manifests.", amphora::cli::cmd_verify,
                       "Every problem is listed on standard output (\"problem: ...\"); the exit status is\n"
                       "4 if there is one, 1 if an artifact's format is newer than this build.\n\n"
                       "Examples:\n"
                       "  amphora verify\n"
                       "  amphora verify emb@2");
    verify->add_option("REF", args_.ref, "check only this artifact (default: every artifact and name record)")
        ->type_name("");

    auto* rm = add("rm", "Remove a name (every version) or one version of it.", amphora::cli::cmd_rm,
                   "On a terminal, rm asks first unless --yes is given; otherwise it does not ask.\n"
                   "It prints what it removed. Artifacts stay until `amphora gc` collects what no\n"
                   "name reaches any more (one saved in the last minute stays for gc's grace\n"
                   "period; see amphora gc --help). A removed version's number is never used again: the\n"
                   "next import under NAME continues after the highest version NAME ever had.\n\n"
                   "Examples:\n"
                   "  amphora rm emb@1\n"
                   "  amphora rm scratch --yes\n"
                   "  amphora rm emb@1 && amphora gc");
    rm->add_option("REF", args_.ref, "NAME (every version) or NAME@N (version N only)")->required()->type_name("");
    rm->add_flag("-y,--yes", args_.yes, "do not ask for confirmation");

    auto* gc = add("gc", "Remove artifacts no name or cache entry reaches, and stale staging areas.", amphora::cli::cmd_gc,
                   "A name keeps its artifact and, through the manifests, every child artifact\n"
                   "of it. Unnamed artifacts saved less than the grace period ago are kept too:\n"
                   "a composite's parts are saved before the parent that names them, and a save\n"
                   "may be about to name what it just stored. --grace 0 collects them at once; use\n"
                   "it only when no save is running. The outputs of pipeline cache entries are\n"
                   "kept like named artifacts.\n\n"
                   "With --remote NAME, gc collects on that remote what none of its names reaches\n"
                   "and is older than the grace period (7 days unless --grace says otherwise), and\n"
                   "aborts multipart uploads older than it: a push in progress is never collected,\n"
                   "with no lock between machines. Names on a remote are removed with\n"
                   "`amphora --store URL rm NAME`.\n\n"
                   "Examples:\n"
                   "  amphora gc --dry-run\n"
                   "  amphora gc\n"
                   "  amphora gc --grace 0\n"
                   "  amphora gc --keep-last 3\n"
                   "  amphora gc --remote team --dry-run\n"
                   "  amphora gc --remote team --grace 30d");
    gc->add_flag("--dry-run", args_.dry_run, "list what would be removed; remove nothing");
    gc->add_option("--keep-last", args_.keep_last,
                   "first drop all but the newest N versions of each name, and the cache entries\n"
                   "whose outputs only those versions reached")
        ->check(whole_number(1, "versions to keep"))
        ->type_name("N");
    gc->add_option("--grace", args_.grace,
                   "keep unnamed artifacts, staging areas and unfinished uploads younger than this:\n"
                   "seconds, or a number with s, m, h or d (default: 60 s; 7d with --remote)")
        ->check(duration())
        ->type_name("DURATION");
    gc->add_option("--remote", args_.remote, "collect on this remote instead of the local store")->type_name("NAME");

    auto* runs = add("runs", "List pipeline runs, oldest first.", amphora::cli::cmd_runs,
                     "One line per run: its id, pipeline, status, start and end time (UTC), how\n"
                     "many steps ran, came from the cache, failed or were skipped, and the host\n"
                     "that ran it. --json prints the run records themselves (docs/FORMAT.md §1.8);\n"
                     "--explain prints each step of the latest run with the reason it ran.\n"
                     "--remote lists the runs on a remote that pipelines share as their cache,\n"
                     "from every machine (§13.4).\n\n"
                     "Examples:\n"
                     "  amphora runs\n"
                     "  amphora runs --json\n"
                     "  amphora runs --explain\n"
                     "  amphora runs --remote team");
    runs->add_flag("--json", args_.json, "print the run records as a JSON array");
    runs->add_flag("--explain", args_.explain, "print why each step of the latest run ran");
    runs->add_option("--remote", args_.remote,
                     "list the runs recorded on this remote instead")
        ->type_name("NAME");

    auto* why = add("why", "Say why each step of a run ran or came from the cache.", amphora::cli::cmd_why,
                    "REF is a run id, a pipeline name (its latest run), or an artifact a step made\n"
                    "(the latest run of that step, which is marked with '*').\n\n"
                    "Examples:\n"
                    "  amphora why docfreq\n"
                    "  amphora why docfreq.model.model");
    why->add_option("REF", args_.ref, "run id, pipeline name or artifact ref")->required()->type_name("");
    why->add_option("--remote", args_.remote, "look in the runs recorded on this remote")->type_name("NAME");

    auto* lineage = add("lineage", "Show the steps and artifacts an artifact was made from.", amphora::cli::cmd_lineage,
                        "Follows the inputs recorded by the steps that made each artifact, back to\n"
                        "artifacts no step made. --dot prints a Graphviz graph (dot -Tsvg renders it).\n\n"
                        "Examples:\n"
                        "  amphora lineage docfreq.model.model\n"
                        "  amphora lineage docfreq.model.model --dot | dot -Tsvg > lineage.svg");
    lineage->add_option("REF", args_.ref, kRefHelp)->required()->type_name("");
    lineage->add_flag("--dot", args_.dot, "print Graphviz dot");
    lineage->add_flag("--json", args_.json, "print the chain as a JSON array");

    auto* migrate = add("migrate", "Rewrite an artifact written by older format versions at the current ones.",
                        amphora::cli::cmd_migrate,
                        "Loads REF as its materializer reads old format versions and saves it again as the\n"
                        "next version of its name (or of --name NAME), whose record says which artifact\n"
                        "it was migrated from (migrated_from in `amphora ls NAME --json`). Children are\n"
                        "rewritten too, "
                        "with default options. The old version stays until it is removed (rm)\n"
                        "and collected (gc). Nothing is written when REF is already current. A container's\n"
                        "own artifact (a list, a map, a record list) is refused: only a program with its\n"
                        "C++ type rebuilds it (Store::migrate<T>). A plugin's\n"
                        "materializer needs the plugin (--plugin PATH or $AMPHORA_PLUGIN_PATH). --json\n"
                        "prints {from, to, rewritten, name, version, unchecked, upgrades: [{materializer,\n"
                        "from, to, artifacts}]} (name \"\" and version 0 when nothing was written). NAME@N\n"
                        "other than NAME's latest needs --name: its copy would become the latest.\n\n"
                        "Examples:\n"
                        "  amphora migrate model\n"
                        "  amphora --plugin ./shapes.so migrate shapes --json\n"
                        "  amphora migrate 1f3a9c07 --name model");
    migrate->add_option("REF", args_.ref, kRefHelp)->required()->type_name("");
    migrate->add_option("--name", args_.name, "record the rewritten artifact under this name (default: REF's name)")
        ->type_name("NAME");
    migrate->add_flag("--json", args_.json, "print JSON (stable fields, ASCII)");

    auto* plugins = add("plugins", "List the materializers and file formats this command knows, and where each comes from.",
                        amphora::cli::cmd_plugins,
                        "Built-in ones, then those of the plugins in the directories of $AMPHORA_PLUGIN_PATH\n"
                        "(every *.so) and of each --plugin PATH. A plugin that cannot be loaded is an\n"
                        "error naming its path. --json prints {materializers: [{name, version, type,\n"
                        "origin}], formats: [{extension, materializer, description, origin}], plugins:\n"
                        "[{name, version, path, materializers, formats}]}.\n\n"
                        "Examples:\n"
                        "  amphora plugins\n"
                        "  amphora --plugin ./shapes.so plugins --json\n"
                        "  AMPHORA_PLUGIN_PATH=~/amphora-plugins amphora plugins");
    plugins->add_flag("--json", args_.json, "print JSON (stable fields, ASCII)");

    auto* remote = add("remote", "Add, list or remove the store's remotes (S3 buckets, shared directories).",
                       amphora::cli::cmd_remote,
                       "  amphora remote add NAME URL [--endpoint URL] [--region R]\n"
                       "  amphora remote list [--json]\n"
                       "  amphora remote remove NAME\n\n"
                       "URL is s3://BUCKET/PREFIX (any S3-compatible service; --endpoint for one that\n"
                       "is not AWS, addressed path-style) or file:///PATH (a directory on a shared file\n"
                       "system). Remotes are kept in the store's remotes.json; credentials never are:\n"
                       "they come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN,\n"
                       "else from ~/.aws/credentials ($AWS_SHARED_CREDENTIALS_FILE), section\n"
                       "$AWS_PROFILE or default. Removing a remote touches nothing on it. --json prints\n"
                       "an array of {name, url, endpoint, region}.\n\n"
                       "Examples:\n"
                       "  amphora remote add team s3://ml-artifacts/amphora\n"
                       "  amphora remote add lab s3://models --endpoint http://rgw.lab:7480\n"
                       "  amphora remote add hpc file:///lustre/project/amphora\n"
                       "  amphora remote list");
    remote->add_option("ACTION", args_.action, "add, list or remove")
        ->required()
        ->check(CLI::IsMember({"add", "list", "remove"}))
        ->type_name("");
    remote->add_option("NAME", args_.remote_name, "the remote's name (add, remove)")->type_name("");
    remote->add_option("URL", args_.url, "s3://BUCKET/PREFIX or file:///PATH (add)")->type_name("");
    remote->add_option("--endpoint", args_.endpoint, "an S3 service that is not AWS: http(s)://HOST[:PORT]")
        ->type_name("URL");
    remote->add_option("--region", args_.region, "the S3 region (default: $AWS_REGION, else us-east-1)")
        ->type_name("R");
    remote->add_flag("--json", args_.json, "print JSON (list)");

    auto* push = add("push", "Copy artifacts and their names to a remote.", amphora::cli::cmd_push,
                     "Copies each REF (default: every version of every name) with every artifact it\n"
                     "reaches, then records the names on the remote: a version is added there unless\n"
                     "one of its versions has the same digest, and a NAME leaves the remote's latest\n"
                     "version of NAME where the local latest is. Version numbers are the remote's\n"
                     "own. What the remote holds already is not sent again; every piece sent is\n"
                     "checked against its manifest first, and each artifact's manifest is written\n"
                     "after its files, so the remote never shows a partial artifact. Progress (bytes,\n"
                     "rate, time left) is shown on a terminal. --json prints {remote, location,\n"
                     "roots, artifacts_copied, artifacts_present, bytes_copied, named: [{name,\n"
                     "version, digest}], seconds}.\n\n"
                     "Examples:\n"
                     "  amphora push\n"
                     "  amphora push model emb@2 --remote team\n"
                     "  amphora push model -j 16 --json");
    push->add_option("REF", args_.refs, "what to push (default: every version of every name)")->type_name("");
    push->add_option("--remote", args_.remote, "the remote (default: the store's only one)")->type_name("NAME");
    push->add_option("-j,--jobs", args_.jobs, "transfers at once (default: 8)")
        ->check(whole_number(1, "transfers"))
        ->type_name("N");
    push->add_flag("--json", args_.json, "print JSON (stable fields, ASCII)");

    auto* pull = add("pull", "Copy artifacts and their names from a remote into the store.", amphora::cli::cmd_pull,
                     "Copies each REF, resolved on the remote (NAME, NAME@N in the remote's numbering,\n"
                     "a digest or a unique prefix), with every artifact it reaches. Every byte is\n"
                     "checked against its manifest before anything is published, and each artifact\n"
                     "appears at once, whole, as a save's does. A NAME or NAME@N is then recorded\n"
                     "as a new local version of NAME unless one has its digest already (for NAME:\n"
                     "unless the local latest has it). --json prints what push --json prints.\n\n"
                     "Examples:\n"
                     "  amphora pull model\n"
                     "  amphora pull model@3 emb --remote team\n"
                     "  amphora pull 1f3a9c07 --json");
    pull->add_option("REF", args_.refs, kRefHelp)->required()->type_name("");
    pull->add_option("--remote", args_.remote, "the remote (default: the store's only one)")->type_name("NAME");
    pull->add_option("-j,--jobs", args_.jobs, "transfers at once (default: 8)")
        ->check(whole_number(1, "transfers"))
        ->type_name("N");
    pull->add_flag("--json", args_.json, "print JSON (stable fields, ASCII)");

    // Leftover arguments are reported by name (an unknown command, a stray
    // argument) instead of as CLI11's generic list.
    app_.allow_extras();
  }

  // Runs the command line; returns the exit status.
  int run(int argc, char** argv) {
    try {
      // `amphora [--store DIR] help [COMMAND]` is `amphora [COMMAND] --help`.
      int first = 1;  // the first argument after the global options
      while (first < argc) {
        const std::string_view arg = argv[first];
        if (arg == "--store" || arg == "--plugin") first += 2;
        else if (arg == "--no-remote") first += 1;
        else if (arg.starts_with("--store=") || arg.starts_with("--plugin=")) first += 1;
        else break;
      }
      if (first < argc && std::string_view(argv[first]) == "help") {
        if (argc - first > 2) throw UsageError("help takes one command at most");
        return print_help(argc - first == 2 ? argv[first + 1] : "");
      }
      for (int i = 1; i < argc; ++i) double_dash_ = double_dash_ || std::string_view(argv[i]) == "--";
      app_.parse(argc, argv);
      return dispatch();
    } catch (const CLI::CallForHelp&) {
      std::cout << app_.help();
      return kOk;
    } catch (const CLI::ParseError& e) {
      return usage_error(describe(e));
    } catch (const UsageError& e) {
      return usage_error(e.what());
    }
  }

 private:
  CLI::App* add(const char* name, const char* description, int (*run)(const Args&), const char* footer) {
    CLI::App* sub = app_.add_subcommand(name, description);
    sub->group("Commands");
    sub->footer(footer);
    CLI::Option* store = sub->add_option("--store", sub_store_, kStoreHelp)->type_name("DIR");
    sub->add_option("--plugin", sub_plugins_, kPluginHelp)
        ->type_name("PATH")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    commands_.push_back({sub, run, store});
    return sub;
  }

  const Command* active() const {
    for (const auto& c : commands_)
      if (app_.got_subcommand(c.app)) return &c;
    return nullptr;
  }

  int dispatch() {
    const Command* command = active();
    if (auto extras = app_.remaining(); !extras.empty()) {
      if (!command && !extras.front().starts_with("-")) throw UsageError("unknown command '" + extras.front() + "'");
      throw UsageError(unexpected(extras));
    }
    if (version_->count()) {
      if (command) throw UsageError("--version does not take a command");
      std::cout << "amphora " AMPHORA_VERSION_STRING "\n";
      return kOk;
    }
    if (!command) throw UsageError("no command given");
    if (command->store->count()) {
      if (store_->count()) throw UsageError("--store given twice (before and after the command)");
      args_.store = sub_store_;
    }
    args_.plugins.insert(args_.plugins.end(), sub_plugins_.begin(), sub_plugins_.end());
    return command->run(args_);
  }

  int print_help(std::string_view topic) {
    if (topic.empty()) {
      std::cout << app_.help();
      return kOk;
    }
    for (const auto& c : commands_)
      if (c.app->get_name() == topic) {
        std::cout << c.app->help("amphora");
        return kOk;
      }
    throw UsageError("unknown command '" + std::string(topic) + "'");
  }

  static std::string unexpected(const std::vector<std::string>& extras) {
    const std::string& first = extras.front();
    std::string text = !first.starts_with("-") ? "unexpected argument '" + first + "'"
                       : first.starts_with("--") ? "unknown option " + first
                                                 : "unknown option " + first + " (put -- before arguments that start with -)";
    if (extras.size() > 1) text += " (and " + std::to_string(extras.size() - 1) + " more)";
    return text;
  }

  // CLI11's reason, on one line, said the way the rest of amphora says it.
  std::string describe(const CLI::ParseError& e) const {
    if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
      // With MultiOptionPolicy::Throw, a repeated option is an ArgumentMismatch.
      for (const CLI::App* app : parsed_apps())
        for (const CLI::Option* opt : app->get_options())
          if (opt->count() > 1 && opt->get_items_expected_max() == 1)
            return opt->get_name() + " given " + std::to_string(opt->count()) + " times; it takes one value";
    }
    // An argument CLI11 could not place explains a missing one best (say, a
    // file name starting with '-' taken for an option), unless it came after
    // `--`, where nothing is an option.
    if (dynamic_cast<const CLI::ExtrasError*>(&e) || (dynamic_cast<const CLI::RequiredError*>(&e) && !double_dash_)) {
      for (const CLI::App* app : parsed_apps())
        if (auto extras = app->remaining(); !extras.empty()) return unexpected(extras);
    }
    return e.what();
  }

  std::vector<const CLI::App*> parsed_apps() const {
    std::vector<const CLI::App*> apps{&app_};
    if (const Command* c = active()) apps.insert(apps.begin(), c->app);
    return apps;
  }

  int usage_error(const std::string& reason) const {
    const Command* command = active();
    std::string topic = command ? "amphora " + command->app->get_name() + " --help" : "amphora --help";
    std::cerr << "amphora: " << one_line(reason) << " (see " << topic << ")\n";
    return kUsage;
  }

  CLI::App app_;
  Args args_;
  std::string sub_store_;
  std::vector<std::string> sub_plugins_;
  bool show_version_ = false;
  bool double_dash_ = false;
  CLI::Option* store_ = nullptr;
  CLI::Option* version_ = nullptr;
  std::vector<Command> commands_;
};

// The documented exit statuses: 2 bad argument, 3 not found, 4 damaged data, 1 anything else.
int exit_status(const std::exception& e) {
  if (dynamic_cast<const amphora::InvalidArgument*>(&e)) return kUsage;
  if (dynamic_cast<const amphora::NotFound*>(&e)) return kNotFound;
  if (dynamic_cast<const amphora::CorruptData*>(&e)) return kCorrupt;
  return kFailure;
}

int run(int argc, char** argv) {
  try {
    Parser parser;
    return parser.run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "amphora: error: out of memory\n";
    return kFailure;
  } catch (const std::exception& e) {
    std::cerr << "amphora: error: " << one_line(e.what()) << "\n";
    return exit_status(e);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Output that never arrived (a full disk, a closed pipe) is a failure, not
  // a silent success.
  return amphora::finish_output(run(argc, argv), "amphora: error");
}
