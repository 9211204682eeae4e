export namespace desktop {
	
	export class Autotest {
	    prompt: string;
	    stopAfter: number;
	    document: string;
	    draft: string;
	
	    static createFrom(source: any = {}) {
	        return new Autotest(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.prompt = source["prompt"];
	        this.stopAfter = source["stopAfter"];
	        this.document = source["document"];
	        this.draft = source["draft"];
	    }
	}

}

export namespace service {
	
	export class Download {
	    key: string;
	    id: string;
	    quant: string;
	    fileName: string;
	    state: string;
	    done: number;
	    total: number;
	    speed: number;
	    etaSec: number;
	    error?: string;
	    path?: string;
	
	    static createFrom(source: any = {}) {
	        return new Download(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.key = source["key"];
	        this.id = source["id"];
	        this.quant = source["quant"];
	        this.fileName = source["fileName"];
	        this.state = source["state"];
	        this.done = source["done"];
	        this.total = source["total"];
	        this.speed = source["speed"];
	        this.etaSec = source["etaSec"];
	        this.error = source["error"];
	        this.path = source["path"];
	    }
	}
	export class KVLimit {
	    kv: string;
	    maxCtx: number;
	    bytes: number;
	
	    static createFrom(source: any = {}) {
	        return new KVLimit(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.kv = source["kv"];
	        this.maxCtx = source["maxCtx"];
	        this.bytes = source["bytes"];
	    }
	}
	export class Estimate {
	    ctx: number;
	    kv: string;
	    weights: number;
	    active: number;
	    experts: number;
	    expertsUsed: number;
	    activeApprox: boolean;
	    kvBytes: number;
	    scratch: number;
	    overhead: number;
	    total: number;
	    budget: number;
	    verdict: string;
	    maxCtx: number;
	    ctxTrain: number;
	    limits: KVLimit[];
	    advice: string[];
	    budgetSource: string;
	    approx: boolean;
	    tokPerSec: number;
	    speedNote?: string;
	
	    static createFrom(source: any = {}) {
	        return new Estimate(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.ctx = source["ctx"];
	        this.kv = source["kv"];
	        this.weights = source["weights"];
	        this.active = source["active"];
	        this.experts = source["experts"];
	        this.expertsUsed = source["expertsUsed"];
	        this.activeApprox = source["activeApprox"];
	        this.kvBytes = source["kvBytes"];
	        this.scratch = source["scratch"];
	        this.overhead = source["overhead"];
	        this.total = source["total"];
	        this.budget = source["budget"];
	        this.verdict = source["verdict"];
	        this.maxCtx = source["maxCtx"];
	        this.ctxTrain = source["ctxTrain"];
	        this.limits = this.convertValues(source["limits"], KVLimit);
	        this.advice = source["advice"];
	        this.budgetSource = source["budgetSource"];
	        this.approx = source["approx"];
	        this.tokPerSec = source["tokPerSec"];
	        this.speedNote = source["speedNote"];
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	export class CatalogFile {
	    quant: string;
	    fileName: string;
	    url: string;
	    size: number;
	    sizeApprox: boolean;
	    sha256?: string;
	    estimate: Estimate;
	    localPath?: string;
	    partial?: number;
	    download?: Download;
	
	    static createFrom(source: any = {}) {
	        return new CatalogFile(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.quant = source["quant"];
	        this.fileName = source["fileName"];
	        this.url = source["url"];
	        this.size = source["size"];
	        this.sizeApprox = source["sizeApprox"];
	        this.sha256 = source["sha256"];
	        this.estimate = this.convertValues(source["estimate"], Estimate);
	        this.localPath = source["localPath"];
	        this.partial = source["partial"];
	        this.download = this.convertValues(source["download"], Download);
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	export class CatalogEntry {
	    id: string;
	    name: string;
	    family: string;
	    paramsB: number;
	    ctxTrain: number;
	    note?: string;
	    runnable: boolean;
	    files: CatalogFile[];
	
	    static createFrom(source: any = {}) {
	        return new CatalogEntry(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.id = source["id"];
	        this.name = source["name"];
	        this.family = source["family"];
	        this.paramsB = source["paramsB"];
	        this.ctxTrain = source["ctxTrain"];
	        this.note = source["note"];
	        this.runnable = source["runnable"];
	        this.files = this.convertValues(source["files"], CatalogFile);
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	
	export class DocumentInfo {
	    id: string;
	    name: string;
	    kind: string;
	    language?: string;
	    size: number;
	    state: string;
	    stage?: string;
	    progress: number;
	    error?: string;
	    pages: number;
	    lines: number;
	    tokens: number;
	    warnings?: string[];
	    whole: boolean;
	    fit?: string;
	    note?: string;
	
	    static createFrom(source: any = {}) {
	        return new DocumentInfo(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.id = source["id"];
	        this.name = source["name"];
	        this.kind = source["kind"];
	        this.language = source["language"];
	        this.size = source["size"];
	        this.state = source["state"];
	        this.stage = source["stage"];
	        this.progress = source["progress"];
	        this.error = source["error"];
	        this.pages = source["pages"];
	        this.lines = source["lines"];
	        this.tokens = source["tokens"];
	        this.warnings = source["warnings"];
	        this.whole = source["whole"];
	        this.fit = source["fit"];
	        this.note = source["note"];
	    }
	}
	export class Source {
	    number: number;
	    documentId: string;
	    document: string;
	    whole: boolean;
	    label: string;
	    firstPage?: number;
	    lastPage?: number;
	    firstLine?: number;
	    lastLine?: number;
	
	    static createFrom(source: any = {}) {
	        return new Source(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.number = source["number"];
	        this.documentId = source["documentId"];
	        this.document = source["document"];
	        this.whole = source["whole"];
	        this.label = source["label"];
	        this.firstPage = source["firstPage"];
	        this.lastPage = source["lastPage"];
	        this.firstLine = source["firstLine"];
	        this.lastLine = source["lastLine"];
	    }
	}
	export class ReplyStats {
	    finishReason: string;
	    thinkingMs?: number;
	    promptTokens: number;
	    genTokens: number;
	    ttftMs: number;
	    prefillTokPerSec: number;
	    decodeTokPerSec: number;
	
	    static createFrom(source: any = {}) {
	        return new ReplyStats(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.finishReason = source["finishReason"];
	        this.thinkingMs = source["thinkingMs"];
	        this.promptTokens = source["promptTokens"];
	        this.genTokens = source["genTokens"];
	        this.ttftMs = source["ttftMs"];
	        this.prefillTokPerSec = source["prefillTokPerSec"];
	        this.decodeTokPerSec = source["decodeTokPerSec"];
	    }
	}
	export class StoredMessage {
	    role: string;
	    content: string;
	    stats?: ReplyStats;
	    sources?: Source[];
	    reasoning?: string;
	
	    static createFrom(source: any = {}) {
	        return new StoredMessage(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.role = source["role"];
	        this.content = source["content"];
	        this.stats = this.convertValues(source["stats"], ReplyStats);
	        this.sources = this.convertValues(source["sources"], Source);
	        this.reasoning = source["reasoning"];
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	export class Conversation {
	    id: number;
	    title: string;
	    model: string;
	    messages: StoredMessage[];
	    documents?: DocumentInfo[];
	    documentsNotKept?: string[];
	
	    static createFrom(source: any = {}) {
	        return new Conversation(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.id = source["id"];
	        this.title = source["title"];
	        this.model = source["model"];
	        this.messages = this.convertValues(source["messages"], StoredMessage);
	        this.documents = this.convertValues(source["documents"], DocumentInfo);
	        this.documentsNotKept = source["documentsNotKept"];
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	export class ConversationSummary {
	    id: number;
	    title: string;
	    model: string;
	    updatedAt: string;
	    messages: number;
	    snippet: string;
	
	    static createFrom(source: any = {}) {
	        return new ConversationSummary(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.id = source["id"];
	        this.title = source["title"];
	        this.model = source["model"];
	        this.updatedAt = source["updatedAt"];
	        this.messages = source["messages"];
	        this.snippet = source["snippet"];
	    }
	}
	export class KVCheckRow {
	    mode: string;
	    top1: number;
	    cosine: number;
	    passed: boolean;
	    skipped?: string;
	    info?: boolean;
	
	    static createFrom(source: any = {}) {
	        return new KVCheckRow(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.mode = source["mode"];
	        this.top1 = source["top1"];
	        this.cosine = source["cosine"];
	        this.passed = source["passed"];
	        this.skipped = source["skipped"];
	        this.info = source["info"];
	    }
	}
	export class KVCheck {
	    state: string;
	    done: number;
	    total: number;
	    cached: boolean;
	    chosen?: string;
	    summary?: string;
	    reason?: string;
	    scaleRatio?: number;
	    tokens?: number;
	    elapsedMs?: number;
	    rows?: KVCheckRow[];
	    note?: string;
	    error?: string;
	
	    static createFrom(source: any = {}) {
	        return new KVCheck(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.state = source["state"];
	        this.done = source["done"];
	        this.total = source["total"];
	        this.cached = source["cached"];
	        this.chosen = source["chosen"];
	        this.summary = source["summary"];
	        this.reason = source["reason"];
	        this.scaleRatio = source["scaleRatio"];
	        this.tokens = source["tokens"];
	        this.elapsedMs = source["elapsedMs"];
	        this.rows = this.convertValues(source["rows"], KVCheckRow);
	        this.note = source["note"];
	        this.error = source["error"];
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	export class Model {
	    name: string;
	    path: string;
	    arch: string;
	    backend: string;
	    ctx: number;
	    ctxTrain: number;
	    kv: string;
	    kvLabel: string;
	    kvCheck?: KVCheck;
	    slots: number;
	    template: string;
	    templateProblem?: string;
	    memoryBytes: number;
	    demo: boolean;
	    remote?: boolean;
	    host?: string;
	    remoteModel?: string;
	    reasoning?: string;
	    thinkingControl?: string;
	
	    static createFrom(source: any = {}) {
	        return new Model(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.name = source["name"];
	        this.path = source["path"];
	        this.arch = source["arch"];
	        this.backend = source["backend"];
	        this.ctx = source["ctx"];
	        this.ctxTrain = source["ctxTrain"];
	        this.kv = source["kv"];
	        this.kvLabel = source["kvLabel"];
	        this.kvCheck = this.convertValues(source["kvCheck"], KVCheck);
	        this.slots = source["slots"];
	        this.template = source["template"];
	        this.templateProblem = source["templateProblem"];
	        this.memoryBytes = source["memoryBytes"];
	        this.demo = source["demo"];
	        this.remote = source["remote"];
	        this.host = source["host"];
	        this.remoteModel = source["remoteModel"];
	        this.reasoning = source["reasoning"];
	        this.thinkingControl = source["thinkingControl"];
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	export class Diagnostics {
	    os: string;
	    arch: string;
	    device: string;
	    cpus: number;
	    threads: number;
	    totalRam: number;
	    availableRam: number;
	    budget: number;
	    budgetSource: string;
	    wiredLimitMb: number;
	    backend: string;
	    backendReason: string;
	    version: string;
	    goVersion: string;
	    wailsVersion: string;
	    model?: Model;
	    templateStatus: string;
	    dataDir: string;
	    configDir: string;
	    modelsDir: string;
	    settingsWarning?: string;
	    chatTarget: string;
	
	    static createFrom(source: any = {}) {
	        return new Diagnostics(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.os = source["os"];
	        this.arch = source["arch"];
	        this.device = source["device"];
	        this.cpus = source["cpus"];
	        this.threads = source["threads"];
	        this.totalRam = source["totalRam"];
	        this.availableRam = source["availableRam"];
	        this.budget = source["budget"];
	        this.budgetSource = source["budgetSource"];
	        this.wiredLimitMb = source["wiredLimitMb"];
	        this.backend = source["backend"];
	        this.backendReason = source["backendReason"];
	        this.version = source["version"];
	        this.goVersion = source["goVersion"];
	        this.wailsVersion = source["wailsVersion"];
	        this.model = this.convertValues(source["model"], Model);
	        this.templateStatus = source["templateStatus"];
	        this.dataDir = source["dataDir"];
	        this.configDir = source["configDir"];
	        this.modelsDir = source["modelsDir"];
	        this.settingsWarning = source["settingsWarning"];
	        this.chatTarget = source["chatTarget"];
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	
	export class DocumentUse {
	    documentId: string;
	    name: string;
	    whole: boolean;
	    sections: number;
	    used: number;
	    status: string;
	
	    static createFrom(source: any = {}) {
	        return new DocumentUse(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.documentId = source["documentId"];
	        this.name = source["name"];
	        this.whole = source["whole"];
	        this.sections = source["sections"];
	        this.used = source["used"];
	        this.status = source["status"];
	    }
	}
	
	
	export class HotkeyStatus {
	    supported: boolean;
	    hotkey: string;
	    error?: string;
	
	    static createFrom(source: any = {}) {
	        return new HotkeyStatus(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.supported = source["supported"];
	        this.hotkey = source["hotkey"];
	        this.error = source["error"];
	    }
	}
	
	
	
	export class LastPrompt {
	    path: string;
	    ids: number[];
	    text: string;
	
	    static createFrom(source: any = {}) {
	        return new LastPrompt(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.path = source["path"];
	        this.ids = source["ids"];
	        this.text = source["text"];
	    }
	}
	export class LoadRequest {
	    path: string;
	    ctx: number;
	    kv: string;
	
	    static createFrom(source: any = {}) {
	        return new LoadRequest(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.path = source["path"];
	        this.ctx = source["ctx"];
	        this.kv = source["kv"];
	    }
	}
	export class LocalModel {
	    path: string;
	    name: string;
	    source: string;
	    arch: string;
	    fileType: string;
	    size: number;
	    params: number;
	    ctxTrain: number;
	    loaded: boolean;
	    demo: boolean;
	    tokPerSec: number;
	    speedNote?: string;
	    problem?: string;
	
	    static createFrom(source: any = {}) {
	        return new LocalModel(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.path = source["path"];
	        this.name = source["name"];
	        this.source = source["source"];
	        this.arch = source["arch"];
	        this.fileType = source["fileType"];
	        this.size = source["size"];
	        this.params = source["params"];
	        this.ctxTrain = source["ctxTrain"];
	        this.loaded = source["loaded"];
	        this.demo = source["demo"];
	        this.tokPerSec = source["tokPerSec"];
	        this.speedNote = source["speedNote"];
	        this.problem = source["problem"];
	    }
	}
	export class Message {
	    role: string;
	    content: string;
	
	    static createFrom(source: any = {}) {
	        return new Message(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.role = source["role"];
	        this.content = source["content"];
	    }
	}
	
	export class Prepare {
	    label: string;
	    done: number;
	    total: number;
	
	    static createFrom(source: any = {}) {
	        return new Prepare(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.label = source["label"];
	        this.done = source["done"];
	        this.total = source["total"];
	    }
	}
	export class PromptPart {
	    text: string;
	    special?: boolean;
	
	    static createFrom(source: any = {}) {
	        return new PromptPart(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.text = source["text"];
	        this.special = source["special"];
	    }
	}
	export class TemplateProblem {
	    message: string;
	    line?: number;
	    column?: number;
	
	    static createFrom(source: any = {}) {
	        return new TemplateProblem(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.message = source["message"];
	        this.line = source["line"];
	        this.column = source["column"];
	    }
	}
	export class TemplatePreview {
	    parts: PromptPart[];
	    text: string;
	    tokens: number;
	    error?: TemplateProblem;
	
	    static createFrom(source: any = {}) {
	        return new TemplatePreview(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.parts = this.convertValues(source["parts"], PromptPart);
	        this.text = source["text"];
	        this.tokens = source["tokens"];
	        this.error = this.convertValues(source["error"], TemplateProblem);
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	export class PromptTemplateInfo {
	    path: string;
	    mode: string;
	    source: string;
	    format?: string;
	    template: string;
	    fileTemplate?: string;
	    fileProblem?: string;
	    modelTemplate: string;
	    custom?: string;
	    problem?: string;
	    loaded: boolean;
	    sample: Message[];
	    preview: TemplatePreview;
	
	    static createFrom(source: any = {}) {
	        return new PromptTemplateInfo(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.path = source["path"];
	        this.mode = source["mode"];
	        this.source = source["source"];
	        this.format = source["format"];
	        this.template = source["template"];
	        this.fileTemplate = source["fileTemplate"];
	        this.fileProblem = source["fileProblem"];
	        this.modelTemplate = source["modelTemplate"];
	        this.custom = source["custom"];
	        this.problem = source["problem"];
	        this.loaded = source["loaded"];
	        this.sample = this.convertValues(source["sample"], Message);
	        this.preview = this.convertValues(source["preview"], TemplatePreview);
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	export class PromptTemplateRequest {
	    path: string;
	    mode: string;
	    source?: string;
	
	    static createFrom(source: any = {}) {
	        return new PromptTemplateRequest(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.path = source["path"];
	        this.mode = source["mode"];
	        this.source = source["source"];
	    }
	}
	export class QuickActionResult {
	    replyId: string;
	    conversationId: number;
	    name: string;
	    prompt: string;
	
	    static createFrom(source: any = {}) {
	        return new QuickActionResult(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.replyId = source["replyId"];
	        this.conversationId = source["conversationId"];
	        this.name = source["name"];
	        this.prompt = source["prompt"];
	    }
	}
	export class RemoteEndpoint {
	    name: string;
	    url: string;
	    model: string;
	    contextTokens: number;
	    hasKey: boolean;
	    active: boolean;
	
	    static createFrom(source: any = {}) {
	        return new RemoteEndpoint(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.name = source["name"];
	        this.url = source["url"];
	        this.model = source["model"];
	        this.contextTokens = source["contextTokens"];
	        this.hasKey = source["hasKey"];
	        this.active = source["active"];
	    }
	}
	export class RemoteEndpointInput {
	    name: string;
	    url: string;
	    key: string;
	    model: string;
	    contextTokens: number;
	
	    static createFrom(source: any = {}) {
	        return new RemoteEndpointInput(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.name = source["name"];
	        this.url = source["url"];
	        this.key = source["key"];
	        this.model = source["model"];
	        this.contextTokens = source["contextTokens"];
	    }
	}
	export class RemoteModel {
	    id: string;
	    contextTokens: number;
	
	    static createFrom(source: any = {}) {
	        return new RemoteModel(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.id = source["id"];
	        this.contextTokens = source["contextTokens"];
	    }
	}
	
	export class SendRequest {
	    conversationId: number;
	    messages: Message[];
	    prompt?: string;
	    maxTokens?: number;
	    replaceLast?: boolean;
	    documents?: string[];
	    thinking?: string;
	
	    static createFrom(source: any = {}) {
	        return new SendRequest(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.conversationId = source["conversationId"];
	        this.messages = this.convertValues(source["messages"], Message);
	        this.prompt = source["prompt"];
	        this.maxTokens = source["maxTokens"];
	        this.replaceLast = source["replaceLast"];
	        this.documents = source["documents"];
	        this.thinking = source["thinking"];
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	export class SendResult {
	    replyId: string;
	    conversationId: number;
	    sources?: Source[];
	    documents?: DocumentUse[];
	
	    static createFrom(source: any = {}) {
	        return new SendResult(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.replyId = source["replyId"];
	        this.conversationId = source["conversationId"];
	        this.sources = this.convertValues(source["sources"], Source);
	        this.documents = this.convertValues(source["documents"], DocumentUse);
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	export class ServerStatus {
	    enabled: boolean;
	    running: boolean;
	    url?: string;
	    error?: string;
	
	    static createFrom(source: any = {}) {
	        return new ServerStatus(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.enabled = source["enabled"];
	        this.running = source["running"];
	        this.url = source["url"];
	        this.error = source["error"];
	    }
	}
	
	export class Status {
	    state: string;
	    error?: string;
	    model?: Model;
	    busy: boolean;
	    running: number;
	    prepare?: Prepare;
	    remote?: Model;
	    seq?: number;
	
	    static createFrom(source: any = {}) {
	        return new Status(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.state = source["state"];
	        this.error = source["error"];
	        this.model = this.convertValues(source["model"], Model);
	        this.busy = source["busy"];
	        this.running = source["running"];
	        this.prepare = this.convertValues(source["prepare"], Prepare);
	        this.remote = this.convertValues(source["remote"], Model);
	        this.seq = source["seq"];
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}
	
	

}

export namespace settings {
	
	export class PromptTemplate {
	    mode: string;
	    source?: string;
	
	    static createFrom(source: any = {}) {
	        return new PromptTemplate(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.mode = source["mode"];
	        this.source = source["source"];
	    }
	}
	export class QuickAction {
	    name: string;
	    prompt: string;
	
	    static createFrom(source: any = {}) {
	        return new QuickAction(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.name = source["name"];
	        this.prompt = source["prompt"];
	    }
	}
	export class RemoteEndpoint {
	    name: string;
	    url: string;
	    key: string;
	    model: string;
	    contextTokens: number;
	
	    static createFrom(source: any = {}) {
	        return new RemoteEndpoint(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.name = source["name"];
	        this.url = source["url"];
	        this.key = source["key"];
	        this.model = source["model"];
	        this.contextTokens = source["contextTokens"];
	    }
	}
	export class Sampling {
	    temperature: number;
	    topP: number;
	    topK: number;
	    minP: number;
	    repeatPenalty: number;
	
	    static createFrom(source: any = {}) {
	        return new Sampling(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.temperature = source["temperature"];
	        this.topP = source["topP"];
	        this.topK = source["topK"];
	        this.minP = source["minP"];
	        this.repeatPenalty = source["repeatPenalty"];
	    }
	}
	export class Server {
	    enabled: boolean;
	    address: string;
	    token?: string;
	
	    static createFrom(source: any = {}) {
	        return new Server(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.enabled = source["enabled"];
	        this.address = source["address"];
	        this.token = source["token"];
	    }
	}
	export class Settings {
	    version: number;
	    lastModel: string;
	    contextTokens: number;
	    kvType: string;
	    sampling: Sampling;
	    systemPrompt: string;
	    theme: string;
	    startAtLogin: boolean;
	    hotkey: string;
	    server: Server;
	    slots: number;
	    threads: number;
	    quickActions: QuickAction[];
	    memoryLimit: number;
	    modelFiles: string[];
	    remoteEndpoints: RemoteEndpoint[];
	    activeRemote: string;
	    documentMaxBytes: number;
	    whenContextDoesNotFit: string;
	    promptTemplates?: Record<string, PromptTemplate>;
	    maxReplyTokens: number;
	
	    static createFrom(source: any = {}) {
	        return new Settings(source);
	    }
	
	    constructor(source: any = {}) {
	        if ('string' === typeof source) source = JSON.parse(source);
	        this.version = source["version"];
	        this.lastModel = source["lastModel"];
	        this.contextTokens = source["contextTokens"];
	        this.kvType = source["kvType"];
	        this.sampling = this.convertValues(source["sampling"], Sampling);
	        this.systemPrompt = source["systemPrompt"];
	        this.theme = source["theme"];
	        this.startAtLogin = source["startAtLogin"];
	        this.hotkey = source["hotkey"];
	        this.server = this.convertValues(source["server"], Server);
	        this.slots = source["slots"];
	        this.threads = source["threads"];
	        this.quickActions = this.convertValues(source["quickActions"], QuickAction);
	        this.memoryLimit = source["memoryLimit"];
	        this.modelFiles = source["modelFiles"];
	        this.remoteEndpoints = this.convertValues(source["remoteEndpoints"], RemoteEndpoint);
	        this.activeRemote = source["activeRemote"];
	        this.documentMaxBytes = source["documentMaxBytes"];
	        this.whenContextDoesNotFit = source["whenContextDoesNotFit"];
	        this.promptTemplates = this.convertValues(source["promptTemplates"], PromptTemplate, true);
	        this.maxReplyTokens = source["maxReplyTokens"];
	    }
	
		convertValues(a: any, classs: any, asMap: boolean = false): any {
		    if (!a) {
		        return a;
		    }
		    if (a.slice && a.map) {
		        return (a as any[]).map(elem => this.convertValues(elem, classs));
		    } else if ("object" === typeof a) {
		        if (asMap) {
		            for (const key of Object.keys(a)) {
		                a[key] = new classs(a[key]);
		            }
		            return a;
		        }
		        return new classs(a);
		    }
		    return a;
		}
	}

}

