// config_saver: the resolved config, as config.json (config_saver.fname), in every checkpoint, so
// that a checkpoint alone is enough to resume, generate from or export. OLMo-core's
// ConfigSaverCallback writes the config once into the save folder; Lathe's run folder gets its
// config.json from run_status, and this callback puts one into each checkpoint.
#include "engine/config/io.h"
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"

namespace lathe::train {

namespace {

class ConfigSaver : public Callback {
public:
    explicit ConfigSaver(const config::ConfigSaverConfig& c) : cfg_(c) {}

    void checkpoint_files(std::vector<std::pair<std::string, std::string>>& files) override {
        files.emplace_back(cfg_.fname, config::to_json(trainer().config()).dump(2) + "\n");
    }

private:
    config::ConfigSaverConfig cfg_;
};

}  // namespace

std::unique_ptr<Callback> make_config_saver(const config::ConfigSaverConfig& c) {
    return std::make_unique<ConfigSaver>(c);
}

}  // namespace lathe::train
