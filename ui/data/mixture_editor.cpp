#include "ui/data/mixture_editor.h"

#include "ui/util/engine_command.h"

#include <QDir>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableView>
#include <QTemporaryFile>
#include <QVBoxLayout>

namespace lathe::ui {

using Json = lathe::config::Json;

MixtureEditor::MixtureEditor(QWidget* parent)
    : QWidget(parent), model_(new MixtureModel(this)), command_(new EngineCommand(this)) {
    connect(command_, &EngineCommand::finished, this, &MixtureEditor::onEstimated);
    setObjectName(QStringLiteral("mixtureEditor"));
    auto* layout = new QVBoxLayout(this);
    auto* intro = new QLabel(
        tr("Train on several sources in set proportions (OLMo-core's source mixture): each "
           "source gives its ratio of the requested tokens, from the start of its files, "
           "repeating them up to its max repetition."),
        this);
    intro->setWordWrap(true);
    layout->addWidget(intro);

    table_ = new QTableView(this);
    table_->setObjectName(QStringLiteral("mixtureTable"));
    table_->setModel(model_);
    table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table_->horizontalHeader()->setSectionResizeMode(MixtureModel::Paths, QHeaderView::Stretch);
    table_->verticalHeader()->hide();
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setMinimumHeight(120);
    layout->addWidget(table_, 1);

    auto* rowButtons = new QHBoxLayout;
    auto* addFolder = new QPushButton(tr("Add folder…"), this);
    addFolder->setToolTip(tr("A prepare-data folder, or a folder of token files"));
    auto* addFiles = new QPushButton(tr("Add files…"), this);
    auto* remove = new QPushButton(tr("Remove"), this);
    auto* normalize = new QPushButton(tr("Normalize ratios"), this);
    normalize->setObjectName(QStringLiteral("mixtureNormalize"));
    rowButtons->addWidget(addFolder);
    rowButtons->addWidget(addFiles);
    rowButtons->addWidget(remove);
    rowButtons->addWidget(normalize);
    rowButtons->addStretch(1);
    layout->addLayout(rowButtons);

    auto* requestedRow = new QHBoxLayout;
    requestedRow->addWidget(new QLabel(tr("Requested tokens:"), this));
    requested_ = new QLineEdit(this);
    requested_->setObjectName(QStringLiteral("mixtureRequested"));
    requested_->setPlaceholderText(tr("e.g. 100000000"));
    requested_->setToolTip(
        tr("dataset.mixture.requested_tokens: the tokens the mixture holds, rounded up to whole "
           "global batches; the ratios divide them"));
    requestedRow->addWidget(requested_, 1);
    estimate_ = new QPushButton(tr("Estimate"), this);
    estimate_->setObjectName(QStringLiteral("mixtureEstimate"));
    estimate_->setToolTip(
        tr("Ask the engine what each source's files hold (lathe-engine "
           "dataset --plan)"));
    requestedRow->addWidget(estimate_);
    apply_ = new QPushButton(tr("Apply to config"), this);
    apply_->setObjectName(QStringLiteral("mixtureApply"));
    requestedRow->addWidget(apply_);
    layout->addLayout(requestedRow);

    problems_ = new QLabel(this);
    problems_->setObjectName(QStringLiteral("mixtureProblems"));
    problems_->setWordWrap(true);
    problems_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    layout->addWidget(problems_);

    connect(addFolder, &QPushButton::clicked, this, [this] {
        const QString dir = QFileDialog::getExistingDirectory(this, tr("Source folder"));
        if (!dir.isEmpty()) model_->addSource({dir});
    });
    connect(addFiles, &QPushButton::clicked, this, [this] {
        const QStringList files = QFileDialog::getOpenFileNames(
            this, tr("Token files of one source"), {}, tr("Token files (*.npy);;All files (*)"));
        if (!files.isEmpty()) model_->addSource(files);
    });
    connect(remove, &QPushButton::clicked, this, [this] {
        const auto rows = table_->selectionModel()->selectedRows();
        for (int i = int(rows.size()) - 1; i >= 0; --i) model_->removeSource(rows[i].row());
    });
    connect(normalize, &QPushButton::clicked, model_, &MixtureModel::normalizeRatios);
    connect(requested_, &QLineEdit::textEdited, this, [this](const QString& text) {
        bool ok = false;
        const qint64 n =
            text.trimmed().remove(QLatin1Char(',')).remove(QLatin1Char('_')).toLongLong(&ok);
        model_->setRequestedTokens(ok && n > 0 ? std::optional<qint64>(n) : std::nullopt);
        engineError_.clear();
        if (!text.trimmed().isEmpty() && !(ok && n > 0))
            engineError_ = tr("requested tokens: “%1” is not a whole number above 0").arg(text);
        refresh();
    });
    connect(estimate_, &QPushButton::clicked, this, &MixtureEditor::estimate);
    connect(apply_, &QPushButton::clicked, this, &MixtureEditor::apply);
    connect(model_, &MixtureModel::changed, this, [this] {
        if (!loading_) edited_ = true;
        refresh();
    });
    refresh();
}

void MixtureEditor::loadFromConfig(const Json& config) {
    if (edited_ || !config.is_object()) return;
    const auto dataset = config.find("dataset");
    if (dataset == config.end() || !dataset->is_object()) return;
    const auto mixture = dataset->find("mixture");
    if (mixture == dataset->end()) return;
    loading_ = true;
    model_->fromJson(*mixture);
    loading_ = false;
    requested_->setText(model_->requestedTokens() ? QString::number(*model_->requestedTokens())
                                                  : QString());
    refresh();
}

QString MixtureEditor::problemsText() const {
    return problems_->text();
}

void MixtureEditor::refresh() {
    QStringList lines = model_->problems();
    if (!engineError_.isEmpty()) lines.prepend(engineError_);
    if (model_->sources().isEmpty()) lines << tr("Add a source to start a mixture.");
    problems_->setText(lines.join(QLatin1Char('\n')));
    QPalette p = problems_->palette();
    p.setColor(QPalette::WindowText, model_->problems().isEmpty() && engineError_.isEmpty()
                                         ? palette().color(QPalette::WindowText)
                                         : QColor(0xc6, 0x28, 0x28));
    problems_->setPalette(p);
    estimate_->setEnabled(!model_->sources().isEmpty() && model_->requestedTokens() &&
                          !isEstimating());
    apply_->setEnabled(!model_->sources().isEmpty() && model_->problems().isEmpty());
}

bool MixtureEditor::estimate() {
    if (isEstimating() || model_->sources().isEmpty() || !model_->requestedTokens()) return false;
    Json config = config_ ? config_() : Json::object();
    if (!config.is_object()) config = Json::object();
    config["dataset"]["source"] = "numpy";
    config["dataset"]["mixture"] = model_->toJson();
    auto* file = new QTemporaryFile(
        QDir::temp().filePath(QStringLiteral("lathe-mixture-XXXXXX.json")), this);
    if (!file->open() || file->write(QByteArray::fromStdString(config.dump(2))) < 0 ||
        !file->flush()) {
        engineError_ = tr("cannot write a temporary config: %1").arg(file->errorString());
        delete file;
        refresh();
        return false;
    }
    delete planConfig_;
    planConfig_ = file;
    command_->start({QStringLiteral("dataset"), file->fileName(), QStringLiteral("--plan")});
    refresh();
    return true;
}

bool MixtureEditor::isEstimating() const {
    return command_->isRunning();
}

void MixtureEditor::onEstimated(bool ok) {
    delete planConfig_;
    planConfig_ = nullptr;
    if (ok) {
        QString error;
        if (const auto plan =
                readOutput<protocol::MixturePlan>(command_->output(), "dataset --plan", &error)) {
            model_->setPlan(*plan);
            engineError_.clear();
        } else {
            ok = false;
            engineError_ = tr("the engine's plan does not fit: %1").arg(error);
        }
    } else {
        // The engine's message names the field and the file; drop its program prefix.
        engineError_ =
            command_->error().replace(QStringLiteral("lathe-engine dataset: "), QString());
    }
    refresh();
    Q_EMIT estimated(ok, engineError_);
}

bool MixtureEditor::apply() {
    if (model_->sources().isEmpty() || !model_->problems().isEmpty()) return false;
    const Json mixture = model_->toJson();
    Q_EMIT applyToConfig(
        {{QStringLiteral("dataset.source"), Json("numpy")},
         {QStringLiteral("dataset.mixture.sources"), mixture["sources"]},
         {QStringLiteral("dataset.mixture.requested_tokens"), mixture["requested_tokens"]}});
    edited_ = false;
    return true;
}

}  // namespace lathe::ui
