// The built-in callbacks by name, as trainer.callbacks configures them.
#include "engine/train/callbacks/builtin.h"
#include "engine/train/trainer.h"
#include "engine/util/error.h"

namespace lathe::train {

void add_builtin_callbacks(Trainer& trainer,
                           const std::shared_ptr<data::TokenDataset>& validation) {
    const auto& t = trainer.trainer_config();
    const auto& c = t.callbacks;
    if (c.console_logger.enabled)
        trainer.add_callback("console_logger",
                             make_console_logger(c.console_logger, t.metrics_collect_interval));
    if (c.checkpointer.enabled && !t.no_checkpoints)
        trainer.add_callback("checkpointer", make_checkpointer(c.checkpointer));
    if (c.speed_monitor.enabled)
        trainer.add_callback("speed_monitor", make_speed_monitor(c.speed_monitor));
    if (c.memory_monitor.enabled)
        trainer.add_callback("memory_monitor", make_memory_monitor(c.memory_monitor));
    if (c.stability_monitor.enabled)
        trainer.add_callback("stability_monitor", make_stability_monitor(c.stability_monitor));
    if (c.lm_evaluator.enabled && !t.no_evals) {
        if (!validation)
            throw Error(
                "trainer.callbacks.lm_evaluator needs held-out data: set "
                "dataset.validation_fraction");
        trainer.add_callback("lm_evaluator", make_lm_evaluator(c.lm_evaluator, validation));
    }
    if (c.profiler.enabled) trainer.add_callback("profiler", make_profiler(c.profiler));
    if (c.sampler.enabled) trainer.add_callback("sampler", make_sampler(c.sampler));
    if (c.config_saver.enabled)
        trainer.add_callback("config_saver", make_config_saver(c.config_saver));
    if (c.metric_saver.enabled)
        trainer.add_callback("metric_saver", make_metric_saver(c.metric_saver));
}

}  // namespace lathe::train
